"""`orchestrator demo`: a throw-away project driven through every kind of outcome.

It drives a `Project` under the same tick lock a cron tick takes, so what it
shows is what `orchestrator tick` does.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from orchestrator import safefs
from orchestrator.config import (
    CONFIG_ENV,
    DB_URL_ENV,
    DEFAULT_CONFIG_NAME,
    load_settings,
)
from orchestrator.errors import RefusedError
from orchestrator.scaffold.cron import shown_program
from orchestrator.scaffold.init import Say, Table, _template, toml_string

DEMO_DIR = "orchestrator-demo"
DEMO_ACTOR = "demo"
DEMO_TASKS = (
    {
        "slug": "fix-login-timeout",
        "title": "Fix the login timeout",
        "body": "Users are logged out after 5 minutes instead of 30.\n\n"
        "Simulation: implement=learns",
        "story": "fails its first implement attempt, then passes with the verifier's hint",
    },
    {
        "slug": "add-dark-mode",
        "title": "Add a dark mode",
        "body": "Offer a dark colour scheme.",
        "story": "is sent back at the research gate with a note, then passes",
    },
    {
        "slug": "speed-up-search",
        "title": "Make search 4x faster",
        "body": "Search takes 2 s on large projects.\n\nSimulation: implement=stuck",
        "story": "never improves at implement: the verifier's score stays at 0.42",
    },
    {
        "slug": "update-readme",
        "title": "Document the new settings",
        "body": "The README does not mention the settings page.",
        "story": "is left waiting at the research gate, for you to approve",
    },
)
REJECT_NOTE = "Also cover the settings page, not only the main window"


@dataclass(frozen=True)
class DemoResult:
    directory: Path
    config: Path
    database_url: str
    seconds: float


def demo_files(directory: Path) -> list[Path]:
    """What the demo writes, so --force can remove exactly that and no more."""
    names = ["orchestrator.toml", "orchestrator.lock", "orchestrator.lock.holder"]
    names += [f"orchestrator.db{suffix}" for suffix in ("", "-wal", "-shm", "-journal")]
    paths = [directory / name for name in names] + [directory / "prompts" / "demo.md"]
    for task in DEMO_TASKS:
        paths += [directory / "tasks" / task["slug"], directory / "state" / task["slug"]]
    return paths


def _prepare_demo_dir(directory: Path, force: bool) -> None:
    if directory.exists() and not directory.is_dir():
        raise RefusedError(f"{directory} is a file; give --dir a folder")
    if directory.is_dir() and any(directory.iterdir()):
        if not force:
            raise RefusedError(
                f"{directory} exists and is not empty (a previous demo?); pass --force to "
                "replace the demo's files in it, or --dir for another folder"
            )
        for path in demo_files(directory):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
    directory.mkdir(parents=True, exist_ok=True)


def write_demo_project(directory: Path) -> Path:
    """The demo's config and prompt; returns the config path."""
    text = _template("demo", "orchestrator.toml").read_text(encoding="utf-8")
    config = directory / DEFAULT_CONFIG_NAME
    config.write_text(text.replace("@PYTHON@", toml_string(sys.executable)), encoding="utf-8")
    prompt = directory / "prompts" / "demo.md"
    prompt.parent.mkdir(parents=True, exist_ok=True)
    prompt.write_text(_template("demo", "prompts", "demo.md").read_text(encoding="utf-8"))
    return config


class Demo:
    """Runs the demo's story; every step prints what a person would type."""

    def __init__(self, directory: Path, say: Say, table: Table) -> None:
        self.directory = directory
        self.say = say
        self.table = table
        cwd = Path.cwd()
        self.shown_dir = (
            os.path.relpath(directory, cwd) if directory.is_relative_to(cwd) else str(directory)
        )
        self.config = write_demo_project(directory)
        # The demo's own database, whatever --db or ORCHESTRATOR_DB_URL say:
        # it must never add its tasks to a real project's database.
        environ = {k: v for k, v in os.environ.items() if k not in (CONFIG_ENV, DB_URL_ENV)}
        self.settings = load_settings(config=self.config, environ=environ, cwd=directory)
        from orchestrator.api.project import Project
        from orchestrator.storage.db import make_engine

        self.engine = make_engine(
            self.settings.database_url, busy_timeout=self.settings.busy_timeout, create=True
        )
        self.project = Project(self.settings, self.engine)

    def close(self) -> None:
        self.project.close()

    # -- narration -----------------------------------------------------------------

    def section(self, title: str) -> None:
        self.say("")
        self.say(f"== {title}")

    def command(self, line: str) -> None:
        self.say(f"$ orchestrator {line}")

    def output(self, line: str) -> None:
        self.say(f"  {line}")

    # -- steps ---------------------------------------------------------------------

    def run(self) -> None:
        stages = " -> ".join(
            f"{s.name} [gate]" if s.gate else s.name
            for s in self.settings.pipelines["default"].stages
        )
        self.say(
            f"orchestrator demo: a simulated project in {self.shown_dir}/ "
            "(no network, no API keys)."
        )
        self.say(f"Pipeline: {stages} -> complete")
        self.say(
            "Each stage runs a simulated agent (python -m orchestrator.scaffold.demo_agent) and a "
            "verifier that prints a JSON verdict."
        )
        self.create()
        self.tick("Tick: every ready task runs its first stage")
        self.say("research is a gate: a passing verdict waits for a person.")
        self.section("A person reviews the research (the demo types it for you)")
        self.human("approve", "fix-login-timeout")
        self.human("reject", "add-dark-mode", REJECT_NOTE)
        self.human("approve", "speed-up-search")
        self.say("update-readme stays at research:awaiting_approval, for you.")
        self.tick("Tick: approved tasks move on; the rejected one runs research again")
        self.show_hint("add-dark-mode", "research")
        self.section("The second look at add-dark-mode")
        self.human("approve", "add-dark-mode")
        self.tick("Tick: add-dark-mode goes on to the end")
        self.report()

    def create(self) -> None:
        from orchestrator.storage import migrate

        self.section("Create the database and add four tasks")
        self.command("db upgrade")
        migrate.upgrade(self.engine)
        self.output(f"database at {migrate.current(self.engine)}")
        for task in DEMO_TASKS:
            self.command(f"add {task['slug']} --title {json.dumps(task['title'])} --body ...")
            self.project.add(task["slug"], task["title"], body=task["body"], by=DEMO_ACTOR)
            self.output(f"added {task['slug']}: {task['story']}")

    def tick(self, title: str) -> None:
        self.section(title)
        self.command("tick")
        # The tick's own exit policy: a demo tick that failed ends the demo
        # with the status `orchestrator tick` would have.
        self.project.tick(say=self.output).raise_for_status()

    def human(self, verb: str, slug: str, note: str | None = None) -> None:
        if verb == "reject":
            assert note is not None
            self.command(f"reject {slug} --note {json.dumps(note)}")
            result = self.project.reject(slug, note, by=DEMO_ACTOR)
        else:
            self.command(f"approve {slug}")
            result = self.project.approve(slug, by=DEMO_ACTOR)
        self.output(result.message)

    def show_hint(self, slug: str, stage: str) -> None:
        notes = self.settings.workspace_root / slug / f"{stage}.md"
        try:
            text = safefs.read_text(notes, 1 << 20)  # the agent's file: a regular one only
            applied = [line for line in text.splitlines() if "feedback" in line]
        except OSError:
            return
        if applied:
            self.say(f"The reject note reached the agent; {self.shown(notes)} says:")
            self.output(applied[0])

    def shown(self, path: Path) -> str:
        return str(Path(self.shown_dir) / path.relative_to(self.directory))

    def sql(self, query: str) -> None:
        self.command(f'sql "{query}"')
        columns, rows = self.project.sql(query)
        for line in self.table(columns, rows).splitlines():
            self.output(line)

    def report(self) -> None:
        self.section("Where things stand")
        self.command("list")
        rows = self.project.tasks()
        columns = ["slug", "state", "attempt", "score", "halt_reason"]
        cells = [[getattr(r, c) for c in columns] for r in rows]
        for line in self.table(columns, cells).splitlines():
            self.output(line)
        self.say("")
        self.say("Every score is a row; the plateau rule halted speed-up-search:")
        self.sql(
            "SELECT task, stage, attempt, score, best_so_far FROM score_history "
            "WHERE task = 'speed-up-search' AND stage = 'implement' ORDER BY attempt"
        )
        self.say("")
        self.say("Every change of state is a row too, with who made it and why:")
        self.sql(
            "SELECT seq, from_state, to_state, actor, coalesce(note, reason) AS why "
            "FROM timeline WHERE task = 'add-dark-mode' ORDER BY seq"
        )

    def explore(self, seconds: float) -> None:
        self.section("Explore further")
        lines = [
            (f"cd {self.shown_dir}", "the config there is found by default"),
            ("orchestrator show add-dark-mode", "one task: transitions and attempts"),
            ("orchestrator approve update-readme", "open the waiting gate..."),
            ("orchestrator tick", "...and watch it run to the end"),
            ("orchestrator scores speed-up-search", "the score history behind the plateau"),
            ("orchestrator resume speed-up-search", "try again, with a fresh plateau window"),
            ('orchestrator sql "SELECT * FROM timeline"', "read-only SQL on the history"),
            ("orchestrator doctor", "check the setup"),
        ]
        program = shown_program()
        if program != "orchestrator":
            activate = Path(sys.executable).parent / "activate"
            how = f"`. {activate}` puts it on PATH" if activate.is_file() else "type it in full"
            self.say(f"(`orchestrator` below is {program}: {how})")
        width = max(len(cmd) for cmd, _ in lines)
        for cmd, why in lines:
            self.output(f"{cmd.ljust(width)}   # {why}")
        self.say("")
        self.say(
            f"Demo finished in {seconds:.1f} s. Start a real project with `orchestrator init`."
        )


@contextmanager
def _demo(directory: Path, say: Say, table: Table) -> Iterator[Demo]:
    demo = Demo(directory, say, table)
    try:
        yield demo
    finally:
        demo.close()


def run_demo(directory: Path, *, force: bool, say: Say, table: Table) -> DemoResult:
    """Build the demo project in `directory` and play the story through."""
    started = time.monotonic()
    directory = Path(os.path.normpath(directory.absolute()))
    _prepare_demo_dir(directory, force)
    with _demo(directory, say, table) as demo:
        demo.run()
        seconds = time.monotonic() - started
        demo.explore(seconds)
        return DemoResult(directory, demo.config, demo.settings.database_url, seconds)
