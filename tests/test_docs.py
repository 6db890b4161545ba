"""The README is the manual: these tests fail when it falls behind the code.

Like sqlite-utils' `tests/test_docs.py`: every command (walking the click
group, `db` subcommands included) and every exit status is documented, and
every command and option explains itself in `--help`. Configuration keys,
state-machine events and the schema's columns are checked the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from sqlalchemy import inspect

from orchestrator import config
from orchestrator.cli import cli
from orchestrator.domain.pipeline import Event
from orchestrator.errors import EXIT_CODES
from orchestrator.storage import migrate
from orchestrator.storage.db import make_engine
from orchestrator.storage.tables import metadata

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DECISIONS = ROOT / "docs" / "decisions.md"


def walk(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    for name, command in sorted(group.commands.items()):
        path = (*prefix, name)
        yield " ".join(path), command
        if isinstance(command, click.Group):
            yield from walk(command, path)


COMMANDS = list(walk(cli))
OPTIONS = [
    (f"{name} {param.opts[-1]}", param)
    for name, command in [("(global)", cli), *COMMANDS]
    for param in command.params
    if isinstance(param, click.Option)
]


def test_the_walk_finds_the_commands() -> None:
    names = {name for name, _ in COMMANDS}
    assert {"init", "demo", "doctor", "cron", "tick", "db", "db upgrade"} <= names


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_command_is_documented_in_readme(name: str, command: click.Command) -> None:
    assert f"orchestrator {name}" in README, f"README.md never shows `orchestrator {name}`"


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_command_has_help(name: str, command: click.Command) -> None:
    assert command.help and len(command.help.strip()) > 20, f"{name} has no help text"


@pytest.mark.parametrize(("name", "option"), OPTIONS, ids=[n for n, _ in OPTIONS])
def test_option_has_help(name: str, option: click.Option) -> None:
    assert option.help and option.help.strip(), f"{name} has no help text"


@pytest.mark.parametrize("code", sorted(EXIT_CODES))
def test_exit_status_is_in_the_readme_table(code: int) -> None:
    assert re.search(rf"^\| {code} \|", README, re.MULTILINE), f"exit status {code} undocumented"


def test_readme_starts_with_the_two_commands_ci_runs() -> None:
    demo = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/orchestrator demo"
    tests = (
        "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest"
    )
    head = README[: README.index("## What it is")]
    assert demo in head and tests in head
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m venv .venv && .venv/bin/pip install -e '.[test]'" in ci
    assert "\n.venv/bin/python -m pytest\n" in ci


CONFIG_KEYS = sorted(
    {
        *config._ORCHESTRATOR_KEYS,
        *config._DEFAULTS_KEYS,
        *config._PIPELINE_KEYS,
        *config._STAGE_KEYS,
        *config._PLATEAU_KEYS,
    }
)


@pytest.mark.parametrize("key", CONFIG_KEYS)
def test_config_key_is_documented(key: str) -> None:
    assert f"`{key}`" in README, f"configuration key {key} undocumented"


@pytest.mark.parametrize("event", [*(e.value for e in Event), "add"])
def test_event_is_in_the_state_legend(event: str) -> None:
    assert re.search(rf"^\| `{event}` \|", README, re.MULTILINE), f"event {event} not in legend"
    assert re.search(rf"--> \w+: {event}$", README, re.MULTILINE), f"{event} not in diagram"


@pytest.mark.parametrize("table", sorted(metadata.tables))
def test_table_columns_are_documented(table: str) -> None:
    assert f"**`{table}`**" in README
    for column in metadata.tables[table].columns:
        assert f"`{column.name}`" in README, f"{table}.{column.name} undocumented"


def test_view_columns_are_documented(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'v.db'}", create=True)
    try:
        migrate.upgrade(engine)
        inspector = inspect(engine)
        views = inspector.get_view_names()
        assert sorted(views) == ["costs", "score_history", "task_states", "timeline"]
        for view in views:
            assert f"**`{view}`**" in README
            for column in inspector.get_columns(view):
                assert f"`{column['name']}`" in README, f"{view}.{column['name']} undocumented"
    finally:
        engine.dispose()


def test_decisions_are_written_down() -> None:
    text = DECISIONS.read_text(encoding="utf-8")
    for topic in ("demo", "init", "doctor", "cron"):
        assert f"`{topic}`" in text
