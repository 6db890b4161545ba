"""`orchestrator init` and `orchestrator demo`: the two ways to start.

`init` writes a commented `orchestrator.toml` with the seeds' default
pipeline (research [gate] → implement → code_review [gate] → bug_find →
adversarial_bug_find → doc_review → referee), prompt templates and two small
judge scripts, then creates the database. The files come from
`orchestrator/templates/`, shipped in the wheel.

`demo` builds a throw-away project whose stages run the simulated agent in
`orchestrator.demo_agent`, and drives it through every kind of outcome in a
few seconds, printing each step as the commands a person would type. It
drives a `Project`, the library face the CLI uses, under the same tick lock
a cron tick takes, so what it shows is what `orchestrator tick` does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from orchestrator.agents import recipes
from orchestrator.config import (
    CONFIG_ENV,
    DB_URL_ENV,
    DEFAULT_CONFIG_NAME,
    Settings,
    load_settings,
)
from orchestrator.errors import RefusedError

Say = Callable[[str], None]
Table = Callable[[Sequence[str], Sequence[Sequence[Any]]], str]

INIT_PROMPTS = (
    "research",
    "implement",
    "code_review",
    "bug_find",
    "adversarial_bug_find",
    "doc_review",
    "referee",
)
INIT_JUDGES = ("pytest_judge.py", "sections_judge.py")
DEMO_DIR = "orchestrator-demo"
DEMO_ACTOR = "demo"

_JUDGE = re.compile(r"@JUDGE:([A-Za-z0-9_.]+)@")


def _template(*parts: str) -> Traversable:
    node = resources.files("orchestrator") / "templates"
    for part in parts:
        node = node / part
    return node


def toml_string(value: str) -> str:
    """A TOML basic string: quote, backslash and control characters escaped."""

    def escape(ch: str) -> str:
        if ch in '"\\':
            return "\\" + ch
        if ord(ch) < 0x20 or ord(ch) == 0x7F:
            return f"\\u{ord(ch):04x}"
        return ch

    return '"' + "".join(escape(ch) for ch in value) + '"'


# -- init ------------------------------------------------------------------------


@dataclass(frozen=True)
class InitResult:
    settings: Settings
    written: tuple[Path, ...]
    kept: tuple[Path, ...]
    revision_before: str | None
    revision: str | None
    backup: Path | None = None


def render_init_config(folder: Path) -> str:
    """The init config, with the judges' absolute paths under `folder`.

    Commands run in each task's workspace, so a relative script path there
    would be looked up in the workspace, not beside the config.
    """
    text = _template("init", "orchestrator.toml").read_text(encoding="utf-8")
    judges = folder / "judges"
    return _JUDGE.sub(lambda m: toml_string(str(judges / m.group(1))), text)


def init_project(
    config_path: Path,
    *,
    force: bool,
    db_url: str | None,
    environ: dict[str, str] | None = None,
    agent: str | None = None,
) -> InitResult:
    """Write the config, prompts and judges; create or migrate the database.

    An existing config is refused unless `force`; existing prompt and judge
    files are always kept (they are the user's edits), and reported as kept.
    """
    config_path = Path(os.path.normpath(config_path.absolute()))
    if config_path.is_dir():
        raise RefusedError(f"{config_path} is a folder; give --config a file path")
    if config_path.exists() and not force:
        raise RefusedError(
            f"{config_path} already exists; pass --force to replace it with the default "
            "(the old one is kept as a .bak file; prompts and judges you edited are kept)"
        )
    folder = config_path.parent
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    kept: list[Path] = []
    text = render_init_config(folder) if agent is None else recipes.recipe_text(agent)
    backup = _backup(config_path) if config_path.exists() else None
    config_path.write_text(text, encoding="utf-8")
    written.append(config_path)
    for body, relative in [] if agent is None else recipes.extra_files(agent):
        target = folder / relative
        if _write_new(target, body):
            target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
            written.append(target)
        else:
            kept.append(target)
    for name in INIT_PROMPTS:
        target = folder / "prompts" / f"{name}.md"
        source = _template("init", "prompts", f"{name}.md")
        (written if _write_new(target, source.read_text(encoding="utf-8")) else kept).append(target)
    for name in INIT_JUDGES:
        target = folder / "judges" / name
        source = _template("init", "judges", name)
        if _write_new(target, source.read_text(encoding="utf-8")):
            target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
            written.append(target)
        else:
            kept.append(target)
    settings = load_settings(config=config_path, db_url=db_url, environ=environ)
    before, after = _create_database(settings)
    return InitResult(settings, tuple(written), tuple(kept), before, after, backup)


def _backup(path: Path) -> Path:
    """Keep the config `--force` replaces: it holds the user's edits.

    `orchestrator.toml.bak`, or `.bak.1`, `.bak.2`… when that is taken, so a
    second `init --force` never overwrites the first backup.
    """
    target = path.with_name(path.name + ".bak")
    number = 0
    while target.exists() or target.is_symlink():
        number += 1
        target = path.with_name(f"{path.name}.bak.{number}")
    shutil.copy2(path, target)
    return target


def _write_new(target: Path, text: str) -> bool:
    if target.exists():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return True


def _create_database(settings: Settings) -> tuple[str | None, str | None]:
    """Create the database or bring it to head, holding the tick lock meanwhile."""
    from orchestrator.locking import TickLock
    from orchestrator.storage import migrate
    from orchestrator.storage.db import make_engine

    engine = make_engine(settings.database_url, busy_timeout=settings.busy_timeout, create=True)
    try:
        with TickLock(settings.lock_file):
            before = migrate.current(engine)
            migrate.upgrade(engine)
            return before, migrate.current(engine)
    finally:
        engine.dispose()


# -- cron ------------------------------------------------------------------------

LOG_NAME = "orchestrator.log"


def cron_schedule(every: int) -> str:
    """Minutes → the five crontab fields; ValueError for what cron cannot say."""
    if every == 1:
        return "* * * * *"
    if 1 < every < 60:
        return f"*/{every} * * * *"
    hours, rest = divmod(every, 60)
    if rest == 0 and 1 <= hours <= 24 and 24 % hours == 0:
        return "0 * * * *" if hours == 1 else "0 0 * * *" if hours == 24 else f"0 */{hours} * * *"
    raise ValueError(
        f"cron cannot run every {every} minutes; use 1-59, or whole hours that divide 24"
    )


def orchestrator_command() -> list[str]:
    """The console script beside this Python, else `python -m orchestrator`."""
    script = Path(sys.executable).parent / "orchestrator"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "orchestrator"]


def shown_program() -> str:
    """How to call orchestrator from a shell here: `orchestrator` when PATH finds
    this installation, else the absolute path (a venv that is not activated)."""
    import shlex

    command = orchestrator_command()
    if len(command) == 1:
        on_path = shutil.which("orchestrator")
        if on_path is not None and Path(on_path).resolve() == Path(command[0]).resolve():
            return "orchestrator"
    return " ".join(shlex.quote(word) for word in command)


def cron_line(settings: Settings, every: int, db_url: str | None, path: str) -> str:
    """One crontab line: absolute paths, `tick --quiet`, output appended to a log.

    Cron runs with a bare PATH (/usr/bin:/bin), where `claude` or `codex`
    are rarely found, so the line carries the PATH given here. `%` is special
    in crontab (it ends the command), so it is escaped.
    """
    import shlex

    assert settings.config_path is not None
    log = settings.config_path.parent / LOG_NAME
    words = [*orchestrator_command(), "--config", str(settings.config_path)]
    if db_url:
        words += ["--db", db_url]
    words += ["tick", "--quiet"]
    command = f"PATH={shlex.quote(path)} " + " ".join(shlex.quote(w) for w in words)
    command += f" >> {shlex.quote(str(log))} 2>&1"
    return f"{cron_schedule(every)} {command.replace('%', chr(92) + '%')}"


CRON_MARK = "# orchestrator-cron"


def _ours(text: str, printed: str, config: Path) -> bool:
    """A crontab line of this config's: the one `--install` marked, or exactly
    the line `cron` prints (pasted by hand before `--install` existed). A
    line the user wrote themselves, even for this config, is theirs."""
    return text.rstrip().endswith(f"{CRON_MARK} {config}") or text.strip() == printed.strip()


def edit_crontab(
    current: str, line: str | None, config: Path, printed: str | None = None
) -> tuple[str, str]:
    """The crontab with this config's line put in (`line`) or taken out (None),
    and what changed: `installed`, `replaced`, `unchanged`, `removed` or
    `absent`. `printed` is the line `cron` prints (default: `line`). The
    first line of ours is replaced in place; any other of ours is dropped,
    so the line is never duplicated; other lines are untouched."""
    printed = printed if printed is not None else (line or "")
    lines = current.splitlines()
    ours = [i for i, text in enumerate(lines) if _ours(text, printed, config)]
    if line is None:
        kept = [text for i, text in enumerate(lines) if i not in ours]
        return ("\n".join(kept) + "\n" if kept else ""), ("removed" if ours else "absent")
    marked = f"{line} {CRON_MARK} {config}"
    if not ours:
        return "\n".join([*lines, marked]) + "\n", "installed"
    if len(ours) == 1 and lines[ours[0]] == marked:
        return current, "unchanged"
    first = ours[0]
    edited = [
        marked if i == first else text
        for i, text in enumerate(lines)
        if i == first or i not in ours
    ]
    return "\n".join(edited) + "\n", "replaced"


def read_crontab() -> str:
    """The user's crontab (`crontab -l`); empty when they have none."""

    done = _crontab(["-l"], None)
    if done.returncode != 0:
        if "no crontab" in done.stderr.lower():
            return ""
        raise RefusedError(f"crontab -l failed: {done.stderr.strip() or done.returncode}")
    return done.stdout


def write_crontab(text: str) -> None:
    done = _crontab(["-"], text)
    if done.returncode != 0:
        raise RefusedError(f"crontab - failed: {done.stderr.strip() or done.returncode}")


def _crontab(args: list[str], stdin: str | None) -> subprocess.CompletedProcess[str]:

    program = shutil.which("crontab")
    if program is None:
        raise RefusedError("crontab is not installed here (no `crontab` on PATH)")
    try:
        # surrogateescape: a crontab in another encoding goes back byte for byte.
        return subprocess.run(
            [program, *args],
            input=stdin,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="surrogateescape",
            check=False,
            timeout=60,
        )
    except subprocess.TimeoutExpired as exc:
        raise RefusedError(f"crontab {' '.join(args)} did not answer in 60 s") from exc


# -- demo ------------------------------------------------------------------------

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
        from orchestrator.project import Project
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
            "Each stage runs a simulated agent (python -m orchestrator.demo_agent) and a "
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
            applied = [line for line in notes.read_text().splitlines() if "feedback" in line]
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
        for line in self.table(columns, [[r[c] for c in columns] for r in rows]).splitlines():
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


__all__ = [
    "DEMO_DIR",
    "DEMO_TASKS",
    "DemoResult",
    "InitResult",
    "cron_line",
    "cron_schedule",
    "demo_files",
    "edit_crontab",
    "init_project",
    "read_crontab",
    "render_init_config",
    "run_demo",
    "write_crontab",
]
