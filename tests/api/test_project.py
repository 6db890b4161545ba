"""The library face: `Project` does what the commands do, the manual's
example (docs/reference/python.md) runs as written, and the CLI loads only what a command needs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from support import Project as ProjectDir

from orchestrator import Project, TaskSpec
from orchestrator.cli.group import OrchestratorGroup
from orchestrator.errors import (
    ConfigError,
    IllegalTransitionError,
    LockBusyError,
    RefusedError,
    SchemaError,
    UnknownTaskError,
)
from orchestrator.locking import TickLock

ROOT = Path(__file__).resolve().parents[2]
PYTHON_PAGE = (ROOT / "docs" / "reference" / "python.md").read_text(encoding="utf-8")


def readme_example() -> str:
    """The one Python block of the manual's "Use from Python" page."""
    blocks = re.findall(r"```python\n(.*?)```", PYTHON_PAGE, flags=re.DOTALL)
    assert len(blocks) == 1, "the section shows exactly one Python example"
    return str(blocks[0])


def test_the_readme_example_runs_as_written(project: ProjectDir) -> None:
    """In a fresh interpreter, in the project's folder, as a user would."""
    done = subprocess.run(
        [sys.executable, "-c", readme_example()],
        cwd=project.dir,
        env=project.process_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "{'passed': 1} 0",
        "research 1 0.9",
        "implement 1 1.0",
        "complete",
    ]
    actors = project.query("SELECT actor FROM transitions WHERE event = 'approve'")
    assert actors == [("alice",)]


def test_every_human_decision_through_the_library(project: ProjectDir) -> None:
    with Project.open(project.config, db=project.db_url) as face:
        assert face.add_many([TaskSpec("a", "A"), TaskSpec("b", "B", priority=3)], by="x") == 2
        with pytest.raises(RefusedError, match="already exists"):
            face.add("a", "Again")
        assert [t.slug for t in face.tasks()] == ["a", "b"]
        with pytest.raises(IllegalTransitionError, match="approve needs"):
            face.approve("a")
        assert face.tick().exit_status == 0
        assert face.task("a").state == "research:awaiting_approval"
        assert face.approve("a", by="ann").changed
        assert not face.approve("a", by="ann").changed  # harmless twice
        assert face.reject("b", "more detail").state == "research"
        assert face.halt("b").state == "research:halted"
        assert [t.slug for t in face.tasks("halted")] == ["b"]
        assert face.resume("b", note="go on").state == "research"
        assert face.cancel("b", by="bob").state == "research:cancelled"
        assert face.task("b").transitions[-1].actor == "bob"
        events = [row.event for row in face.history("a")]
        assert events == ["add", "claim", "await_approval", "approve"]
        assert len(face.history(limit=2)) == 2
        columns, rows = face.sql("SELECT slug FROM tasks ORDER BY slug")
        assert (columns, rows) == (["slug"], [("a",), ("b",)])
        assert [r.score for r in face.scores("a", "research")] == [0.9]
        with pytest.raises(UnknownTaskError):
            face.task("nope")


def test_tick_result_and_the_lock(project: ProjectDir) -> None:
    """The result carries the command's exit status; a held lock is 75,
    or waited for; `task` must name a task."""
    lines: list[str] = []
    with Project.open(project.config, db=project.db_url) as face:
        face.add("t1", "One")
        with TickLock(face.settings.lock_file):
            with pytest.raises(LockBusyError) as busy:
                face.tick()
            assert busy.value.exit_code == 75
        with pytest.raises(UnknownTaskError):
            face.tick(task="t2")
        dry = face.tick(dry_run=True, say=lines.append)
        assert dry.claimed == 0 and lines and project.state("t1") == "research"
        result = face.tick(jobs=4, max_tasks=1)
        assert result.claimed == 1 and result.outcomes == {"passed": 1}
        assert result.exit_status == 0 and result.did_work
        result.raise_for_status()
        assert not face.tick().did_work
    with TickLock(face.settings.lock_file):  # released: a new holder gets it at once
        pass


def test_open_refuses_what_the_cli_refuses(
    tmp_path: Path, project: ProjectDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SchemaError, match="not found"):
        Project.open(project.config, db=f"sqlite:///{tmp_path / 'missing.db'}")
    with pytest.raises(ConfigError, match="config file not found"):
        Project.open(tmp_path / "nowhere" / "orchestrator.toml")
    monkeypatch.delenv("ORCHESTRATOR_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"no orchestrator\.toml found"):
        Project.open()


# -- the lazy command registry ------------------------------------------------------

HEAVY = ("sqlalchemy", "alembic", "orchestrator.tick", "orchestrator.api.project")


def loaded_modules(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, set[str]]:
    """Run the real CLI in a fresh interpreter; the modules it had loaded at exit."""
    code = textwrap.dedent(
        f"""
        import atexit, json, sys
        atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))
        from orchestrator.cli import main
        main({args!r})
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    return done.returncode, set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_help_imports_no_database_code(project: ProjectDir) -> None:
    status, modules = loaded_modules(["--help"], project.dir, project.process_env())
    assert status == 0
    assert not [m for m in modules if m.startswith(HEAVY)]


def test_a_busy_tick_loads_only_the_ticking_commands(project: ProjectDir) -> None:
    with TickLock(project.dir / "orchestrator.lock"):
        status, modules = loaded_modules(["tick", "-q"], project.dir, project.process_env())
    assert status == 75
    assert "orchestrator.cli.ticking" in modules
    others = ["tasks", "gates", "history", "db", "project", "verdict"]
    assert not [m for m in others if f"orchestrator.cli.{m}" in modules]
    assert not [m for m in modules if m.startswith(HEAVY)]


def test_registering_a_command_is_one_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "extra_commands.py").write_text(
        "import click\n\n@click.command()\ndef hello():\n    '''Say hello.'''\n"
        "    click.echo('hello')\n\nnot_a_command = 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "extra_commands", raising=False)
    group = OrchestratorGroup(
        "g",
        lazy_subcommands={
            "hello": "extra_commands:hello",
            "broken": "extra_commands:not_a_command",
        },
    )
    assert "extra_commands" not in sys.modules
    assert group.list_commands(click.Context(group)) == ["broken", "hello"]
    assert "extra_commands" not in sys.modules  # listing names imports nothing
    assert CliRunner().invoke(group, ["hello"]).output == "hello\n"
    with pytest.raises(TypeError, match="not a click command"):
        group.commands["broken"]
    assert group.get_command(click.Context(group), "missing") is None


def test_reading_commands_do_not_load_the_tick(project: ProjectDir) -> None:
    """`list` opens the database but has no use for the engine or the runner."""
    status, modules = loaded_modules(["list"], project.dir, project.process_env())
    assert status == 0
    assert "sqlalchemy" in modules and "orchestrator.api.project" in modules
    assert not {"orchestrator.tick", "orchestrator.runner", "alembic"} & modules


# review finding: a `Project` keeps the settings it was opened with, and the
# tick's config watch compares the file against them, so after ANY edit of
# orchestrator.toml (even a comment) every later `project.tick()` of a
# long-lived Project (a notebook, "your own scheduler") claims nothing, for
# ever, with exit_status 0. `orchestrator tick` (and `run`, which reloads the
# config each round) would claim. Reload the settings in `tick()` when the
# file changed, or refuse loudly.
def test_a_long_lived_project_still_ticks_after_the_config_is_edited(
    project: ProjectDir,
) -> None:
    with Project.open(project.config, db=project.db_url) as face:
        face.add("t1", "One")
        assert face.tick().claimed == 1
        with project.config.open("a", encoding="utf-8") as config:
            config.write("\n# a comment added by hand\n")
        face.add("t2", "Two")
        result = face.tick()
        assert result.stopped_claiming is None, result
        assert result.claimed == 1, result
