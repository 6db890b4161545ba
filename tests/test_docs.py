"""The manual keeps up with the code: these tests fail when it falls behind.

Like sqlite-utils' `tests/test_docs.py`, in both directions: every command,
option and argument (walking the click group, `db` subcommands included),
every configuration key the loader accepts, every exit status, event kind,
`ORCHESTRATOR_*` variable, table, view and column the code has is in the
reference under `docs/reference/`, and the reference names nothing the
code no longer has. Each checker is a function from (what the code has,
what the page says) to a list of problems, so that a test can hand it a
code side with one more name and see the name reported. Every command and
option also explains itself in `--help`, and every relative link resolves.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import click
import pytest
from sqlalchemy import inspect

from orchestrator import errors
from orchestrator.agents.config import AGENT_SECTION
from orchestrator.cli import cli
from orchestrator.config import core, orchestrator_table
from orchestrator.config import sections as config_sections
from orchestrator.config.schema import Key, Text
from orchestrator.domain import event_kinds as kinds
from orchestrator.domain.decide import HaltReason, Outcome
from orchestrator.domain.pipeline import Event
from orchestrator.events import hooks
from orchestrator.features import FEATURES
from orchestrator.features.pools import config as pool_config
from orchestrator.guards import config as guard_config
from orchestrator.storage import migrate
from orchestrator.storage.db import make_engine
from orchestrator.storage.tables import metadata

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"
README = (ROOT / "README.md").read_text(encoding="utf-8")
DECISIONS = DOCS / "decisions.md"
MANUAL = sorted([ROOT / "README.md", *DOCS.rglob("*.md")])


def page(name: str) -> str:
    return (REFERENCE / name).read_text(encoding="utf-8")


def sections(text: str, level: str = "##") -> Iterator[tuple[str, str]]:
    """(heading, body up to the next heading) for each heading of this level;
    fenced blocks are left out (a `# comment` in one is no heading)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    parts = re.split(rf"^{level} (.+)$", text, flags=re.MULTILINE)
    for heading, body in zip(parts[1::2], parts[2::2], strict=True):
        yield heading.strip(), re.split(r"^#+ ", body, flags=re.MULTILINE)[0]


def first_cells(body: str) -> Iterator[list[str]]:
    """The cells of each table row, the header and the rule excepted."""
    rows = [line for line in body.splitlines() if line.startswith("| ")]
    for row in rows[2:] if rows else []:
        yield [cell.strip() for cell in row.strip().strip("|").split(" | ")]


def spans(cell: str) -> list[str]:
    """The first word of each `code span` in a cell."""
    return [span.split()[0] for span in re.findall(r"`([^`]+)`", cell) if span.split()]


# Commands, options and arguments ------------------------------------------


def walk(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    for name, command in sorted(group.commands.items()):
        path = (*prefix, name)
        yield " ".join(path), command
        if isinstance(command, click.Group):
            yield from walk(command, path)


def parameter_names(command: click.Command) -> set[str]:
    names: set[str] = set()
    for param in command.params:
        if isinstance(param, click.Argument):
            names.add((param.name or "").upper())
        else:
            names.update(param.opts, param.secondary_opts)
    return names


def code_commands(group: click.Group) -> dict[str, set[str]]:
    """Each command's parameters; "(global)" holds the group's and `--help`."""
    found = {name: parameter_names(command) for name, command in walk(group)}
    helps = set(group.get_help_option_names(click.Context(group, **group.context_settings)))
    found["(global)"] = parameter_names(group) | helps
    return found


PARAMETER = re.compile(r"-{1,2}[a-z][a-z-]*|[A-Z][A-Z_]*")


def documented_commands(text: str) -> dict[str, set[str]]:
    """`## \\`orchestrator NAME\\`` sections and the parameters their tables name."""
    found: dict[str, set[str]] = {}
    for heading, body in sections(text):
        match = re.fullmatch(r"`orchestrator ([a-z][a-z -]*)`", heading)
        if heading == "Global options":
            name = "(global)"
        elif match:
            name = match[1]
        else:
            continue
        found[name] = {
            token
            for cells in first_cells(body)
            for token in spans(cells[0])
            if PARAMETER.fullmatch(token)
        }
    return found


def compare(
    code: Mapping[str, set[str]], docs: Mapping[str, set[str]], what: str, where: str
) -> list[str]:
    """Names on one side only, for each group of names on both sides."""
    problems = [f"{what} {name!r} is not in {where}" for name in sorted(set(code) - set(docs))]
    problems += [
        f"{where} has {what} {name!r}, which the code does not"
        for name in sorted(set(docs) - set(code))
    ]
    for name in sorted(set(code) & set(docs)):
        problems += [
            f"{name}: {item} is not in {where}" for item in sorted(code[name] - docs[name])
        ]
        problems += [
            f"{name}: {where} has {item}, which the code does not"
            for item in sorted(docs[name] - code[name])
        ]
    return problems


def command_problems(group: click.Group, text: str) -> list[str]:
    return compare(code_commands(group), documented_commands(text), "command", "commands.md")


COMMANDS = list(walk(cli))
OPTIONS = [
    (f"{name} {param.opts[-1]}", param)
    for name, command in [("(global)", cli), *COMMANDS]
    for param in command.params
    if isinstance(param, click.Option)
]


def test_the_walk_finds_the_commands() -> None:
    names = {name for name, _ in COMMANDS}
    assert {"init", "demo", "doctor", "cron", "tick", "db", "db upgrade", "serve"} <= names
    assert {"--title", "--budget", "SLUG"} <= code_commands(cli)["add"]


def test_every_command_option_and_argument_is_in_the_reference() -> None:
    assert command_problems(cli, page("commands.md")) == []


def test_a_command_or_option_added_without_docs_is_reported() -> None:
    tick = copy.copy(cli.commands["tick"])
    tick.params = [*tick.params, click.Option(["--wobble"], help="new")]
    grown = click.Group(
        "orchestrator",
        params=list(cli.params),
        context_settings=cli.context_settings,
        commands={
            **{name: cli.commands[name] for name in cli.list_commands(click.Context(cli))},
            "tick": tick,
            "frobnicate": click.Command("frobnicate", params=[click.Argument(["thing"])]),
        },
    )
    problems = command_problems(grown, page("commands.md"))
    assert problems == [
        "command 'frobnicate' is not in commands.md",
        "tick: --wobble is not in commands.md",
    ]


def test_a_command_the_code_lost_is_reported() -> None:
    gone = (
        "\n## `orchestrator frobnicate`\n\n| option | meaning |\n| --- | --- |\n| `--zap` | x |\n"
    )
    dry_run = "| `--dry-run` | print what the tick would do"
    text = (page("commands.md") + gone).replace(dry_run, "| `--wobble` | x |\n" + dry_run)
    assert command_problems(cli, text) == [
        "commands.md has command 'frobnicate', which the code does not",
        "tick: commands.md has --wobble, which the code does not",
    ]


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_command_has_help(name: str, command: click.Command) -> None:
    assert command.help and len(command.help.strip()) > 20, f"{name} has no help text"


@pytest.mark.parametrize(("name", "option"), OPTIONS, ids=[n for n, _ in OPTIONS])
def test_option_has_help(name: str, option: click.Option) -> None:
    assert option.help and option.help.strip(), f"{name} has no help text"


# Configuration keys ---------------------------------------------------------


def code_config() -> dict[str, set[str]]:
    """The key lists the loader checks each table against, by table."""
    schema = core.schema(config_sections.FEATURE_SECTIONS)
    return {
        "orchestrator.toml": set(schema.top()),
        "[orchestrator]": set(orchestrator_table.ORCHESTRATOR_SECTION.names()),
        "[defaults]": set(schema.allowed("defaults")),
        "[pipelines.NAME]": set(schema.allowed("pipeline")),
        "[[pipelines.NAME.stages]]": set(schema.allowed("stage")),
        "plateau": set(core.PLATEAU_SECTION.names()),
        "backoff": set(guard_config.BACKOFF_SECTION.names()),
        "[[hooks]]": set(hooks.HOOKS_SECTION.names()),
        "[pools.NAME]": set(pool_config.POOLS_SECTION.names("pools")),
        # A feature package's own tables (`Feature.config`), as it declares them.
        **{
            f"[{s.table}]": set(s.names(s.table))
            for feature in FEATURES
            for s in feature.config
            if s.table is not None
        },
    }


def with_key(section: Any, name: str) -> Any:
    """`section` with one more key, as a feature that adds one would declare it."""
    extra = Key(name, Text(), None, "new", frozenset({section.table}))
    return dataclasses.replace(section, keys=(*section.keys, extra))


def stage_only(section: Any, name: str) -> Any:
    """`section` with `name` no longer accepted in [defaults]."""
    keys = tuple(
        dataclasses.replace(k, scope=k.scope - {"defaults"}) if k.name == name else k
        for k in section.keys
    )
    return dataclasses.replace(section, keys=keys)


def documented_config(text: str) -> dict[str, set[str]]:
    """Tables under a heading that names a TOML table; the stage table's
    `[defaults]` column says which keys `[defaults]` takes too."""
    found: dict[str, set[str]] = {}
    for level in ("##", "###"):
        for heading, body in sections(text, level):
            named = re.findall(r"`([^`]+)`", heading)
            if not named:
                continue
            rows = list(first_cells(body))
            found[named[-1]] = {spans(cells[0])[0] for cells in rows if spans(cells[0])}
            if named[-1] == "[[pipelines.NAME.stages]]":
                found["[defaults]"] = {
                    spans(cells[0])[0] for cells in rows if len(cells) > 1 and cells[1] == "yes"
                }
    return found


def config_problems(text: str) -> list[str]:
    return compare(code_config(), documented_config(text), "table", "configuration.md")


def test_every_configuration_key_is_in_the_reference() -> None:
    assert config_problems(page("configuration.md")) == []


def test_a_configuration_key_added_without_docs_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        orchestrator_table,
        "ORCHESTRATOR_SECTION",
        with_key(orchestrator_table.ORCHESTRATOR_SECTION, "frobnicate"),
    )
    monkeypatch.setattr(hooks, "HOOKS_SECTION", with_key(hooks.HOOKS_SECTION, "wobble"))
    assert config_problems(page("configuration.md")) == [
        "[[hooks]]: wobble is not in configuration.md",
        "[orchestrator]: frobnicate is not in configuration.md",
    ]


def test_a_configuration_key_the_loader_lost_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    features = tuple(
        stage_only(section, "max_cost_usd") if section is AGENT_SECTION else section
        for section in config_sections.FEATURE_SECTIONS
    )
    monkeypatch.setattr(config_sections, "FEATURE_SECTIONS", features)
    assert config_problems(page("configuration.md")) == [
        "[defaults]: configuration.md has max_cost_usd, which the code does not"
    ]


# Exit statuses --------------------------------------------------------------


def subclasses(cls: type) -> Iterator[type]:
    sub: type
    for sub in cls.__subclasses__():
        yield sub
        yield from subclasses(sub)


def code_statuses() -> set[int]:
    """EXIT_CODES, and every status an error class declares."""
    declared = {
        sub.__dict__["exit_code"]
        for sub in subclasses(errors.OrchestratorError)
        if isinstance(sub.__dict__.get("exit_code"), int)
    }
    return set(errors.EXIT_CODES) | declared | {errors.OrchestratorError.exit_code}


def documented_statuses(text: str) -> set[int]:
    return {int(code) for code in re.findall(r"^\| (\d+) \|", text, re.MULTILINE)}


def status_problems(text: str) -> list[str]:
    return compare(
        {"statuses": {str(c) for c in code_statuses()}},
        {"statuses": {str(c) for c in documented_statuses(text)}},
        "group",
        "exit-status.md",
    )


def test_every_exit_status_is_in_the_reference() -> None:
    assert status_problems(page("exit-status.md")) == []
    assert {0, 1, 2, 65, 69, 70, 74, 75, 77, 78, 130, 143} <= code_statuses()


def test_an_exit_status_added_without_docs_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(errors.EXIT_CODES, 71, "a new status")
    assert status_problems(page("exit-status.md")) == ["statuses: 71 is not in exit-status.md"]
    text = page("exit-status.md") + "| 76 | gone |\n"
    monkeypatch.delitem(errors.EXIT_CODES, 71)
    assert status_problems(text) == ["statuses: exit-status.md has 76, which the code does not"]


# Event kinds and the state machine's events --------------------------------


def documented_kinds(text: str) -> set[str]:
    table = text.split("\n## ", 1)[0]
    return {spans(cells[0])[0] for cells in first_cells(table) if spans(cells[0])}


def kind_problems(text: str) -> list[str]:
    return compare(
        {"kinds": set(kinds.KINDS)}, {"kinds": documented_kinds(text)}, "group", "events.md"
    )


def test_every_event_kind_is_in_the_reference() -> None:
    assert kind_problems(page("events.md")) == []


def test_an_event_kind_added_without_docs_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kinds, "KINDS", (*kinds.KINDS, "frobnicated"))
    assert kind_problems(page("events.md")) == ["kinds: frobnicated is not in events.md"]


STATE_MACHINE = (DOCS / "explanation" / "state-machine.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("event", [*(e.value for e in Event), "add"])
def test_event_is_in_the_state_legend(event: str) -> None:
    assert re.search(rf"^\| `{event}` \|", STATE_MACHINE, re.MULTILINE), f"{event} not in legend"
    assert re.search(rf"--> \w+: {event}$", STATE_MACHINE, re.MULTILINE), f"{event} not in diagram"


def test_the_legend_names_no_event_the_code_lacks() -> None:
    legend = dict(sections(STATE_MACHINE))["Events"]
    named = {spans(cells[0])[0] for cells in first_cells(legend)}
    assert named == {*(e.value for e in Event), "add"}


def test_the_outcomes_table_matches_the_code() -> None:
    table = dict(sections(STATE_MACHINE))["Outcomes"]
    named = {spans(cells[0])[0] for cells in first_cells(table)}
    assert named == {o.value for o in Outcome}


@pytest.mark.parametrize("reason", [r.value for r in HaltReason])
def test_halt_reason_is_in_the_schema_reference(reason: str) -> None:
    tasks = documented_relations(page("sql.md"))["tasks"]
    assert "halt_reason" in tasks
    row = re.search(r"^\| `halt_reason` \|(.*)$", page("sql.md"), re.MULTILINE)
    assert row and f"`{reason}`" in row[1], f"halt reason {reason} undocumented"


# Environment variables ------------------------------------------------------

VARIABLE = re.compile(r"""["'](ORCHESTRATOR_[A-Z0-9_]*[A-Z0-9])["']""")


def code_variables() -> set[str]:
    """`ORCHESTRATOR_*` names the code, the benchmarks and the tests spell out
    as strings (this file excepted: it makes up names on purpose)."""
    found: set[str] = set()
    for folder in ("orchestrator", "bench", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.resolve() != Path(__file__).resolve():
                found.update(VARIABLE.findall(path.read_text(encoding="utf-8")))
    return found


def variable_problems(code: set[str], text: str) -> list[str]:
    documented = {
        token
        for cells in first_cells(text)
        for token in spans(cells[0])
        if token.startswith("ORCHESTRATOR_")
    }
    return compare({"variables": code}, {"variables": documented}, "group", "environment.md")


def test_every_environment_variable_is_in_the_reference() -> None:
    code = code_variables()
    assert {"ORCHESTRATOR_CONFIG", "ORCHESTRATOR_DB_URL", "ORCHESTRATOR_PROCESS_TAG"} <= code
    assert variable_problems(code, page("environment.md")) == []


def test_an_environment_variable_added_without_docs_is_reported() -> None:
    made_up = "ORCHESTRATOR_" + "FROBNICATE"
    assert variable_problems({*code_variables(), made_up}, page("environment.md")) == [
        f"variables: {made_up} is not in environment.md"
    ]


# The SQL schema -------------------------------------------------------------


def documented_relations(text: str) -> dict[str, set[str]]:
    """Each `**\\`name\\`**` paragraph and the columns of the table under it."""
    parts = re.split(r"^\*\*`(\w+)`\*\*", text, flags=re.MULTILINE)
    found: dict[str, set[str]] = {}
    for name, rest in zip(parts[1::2], parts[2::2], strict=True):
        body = re.split(r"^#+ ", rest, flags=re.MULTILINE)[0]
        found[name] = {token for cells in first_cells(body) for token in spans(cells[0])}
    return found


def code_relations(tmp_path: Path) -> dict[str, set[str]]:
    found = {name: {c.name for c in table.columns} for name, table in metadata.tables.items()}
    engine = make_engine(f"sqlite:///{tmp_path / 'v.db'}", create=True)
    try:
        migrate.upgrade(engine)
        inspector = inspect(engine)
        for view in inspector.get_view_names():
            found[view] = {column["name"] for column in inspector.get_columns(view)}
    finally:
        engine.dispose()
    return found


def test_every_table_view_and_column_is_in_the_reference(tmp_path: Path) -> None:
    code = code_relations(tmp_path)
    assert {"tasks", "attempts", "transitions", "task_states", "costs"} <= set(code)
    assert compare(code, documented_relations(page("sql.md")), "table", "sql.md") == []


def test_a_column_or_table_added_without_docs_is_reported(tmp_path: Path) -> None:
    code = code_relations(tmp_path)
    code["tasks"] = code["tasks"] | {"frobnicated_at"}
    code["frobs"] = {"id"}
    assert compare(code, documented_relations(page("sql.md")), "table", "sql.md") == [
        "table 'frobs' is not in sql.md",
        "tasks: frobnicated_at is not in sql.md",
    ]


# The README and the pages ---------------------------------------------------


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


def test_the_readme_and_the_decisions_stay_short() -> None:
    assert len(README.splitlines()) <= 400
    assert len(DECISIONS.read_text(encoding="utf-8").splitlines()) <= 400
    for part in (DOCS / "decisions").glob("*.md"):
        assert len(part.read_text(encoding="utf-8").splitlines()) <= 200, part.name


def test_the_readme_maps_every_page() -> None:
    for path in DOCS.rglob("*.md"):
        assert f"]({path.relative_to(ROOT).as_posix()})" in README, f"README does not link {path}"


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to -."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def link_problems(path: Path, text: str) -> list[str]:
    problems = []
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, fragment = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            problems.append(f"{path.name}: {target} leads nowhere")
        elif fragment and linked.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.MULTILINE)
            if fragment not in {anchor(h) for h in headings}:
                problems.append(f"{path.name}: {target} names no heading")
    return problems


@pytest.mark.parametrize("path", MANUAL, ids=[p.relative_to(ROOT).as_posix() for p in MANUAL])
def test_every_relative_link_resolves(path: Path) -> None:
    assert link_problems(path, path.read_text(encoding="utf-8")) == []


def test_a_broken_link_is_reported() -> None:
    readme = ROOT / "README.md"
    text = "[a](docs/nowhere.md) [b](docs/tutorial.md#no-such-step) [c](docs/tutorial.md)"
    assert link_problems(readme, text) == [
        "README.md: docs/nowhere.md leads nowhere",
        "README.md: docs/tutorial.md#no-such-step names no heading",
    ]


@pytest.mark.parametrize("path", MANUAL, ids=[p.relative_to(ROOT).as_posix() for p in MANUAL])
def test_every_toml_example_parses(path: Path) -> None:
    for block in re.findall(r"```toml\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
        tomllib.loads(block)


def test_decisions_are_written_down() -> None:
    text = DECISIONS.read_text(encoding="utf-8")
    for topic in ("demo", "init", "doctor", "cron"):
        assert f"`{topic}`" in text
