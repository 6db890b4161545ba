"""Every command's `--json` keys against its row in docs/reference/commands.md.

People script against these keys, and the reference is where they read
them: a key the reference names that the command does not print (`scores`
once lacked `run` and `outcome`), or one it prints that the reference does
not name, is a broken promise either way. The test reads the keys from the
reference itself, runs each command on a small real project (a repository
pipeline with a gate and a pool, one attempt, one restore), and compares
the sets both ways; a command that gains `--json` must be added here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click
from e2e.e2e_support import stage
from support import Project, make_repo, write_config

from orchestrator.cli import cli

COMMANDS_MD = Path(__file__).resolve().parents[2] / "docs" / "reference" / "commands.md"

# What each command's JSON is run with on the project below.
ARGV: dict[str, tuple[str, ...]] = {
    "list": ("list", "--json"),
    "show": ("show", "t2", "--json"),
    "history": ("history", "--json"),
    "scores": ("scores", "t1", "--json"),
    "explain": ("explain", "t1", "--json"),
    "restore": ("restore", "t1", "--attempt", "1", "--json"),
    "calibrate": ("calibrate", "t1", "--stage", "implement", "--samples", "2", "--json"),
    "events": ("events", "--json"),
    "pool list": ("pool", "list", "--json"),
    "verifiers": ("verifiers", "--json"),
    "simulate": ("simulate", "--patience", "2", "--min-delta", "0", "--json"),
    "pipelines": ("pipelines", "--json"),
}
# Keys whose value the row describes with its own list: compared one level down.
NESTED: dict[str, tuple[str, ...]] = {
    "show": ("transitions", "attempts"),
    "explain": ("change", "version"),
    "events": ("deliveries",),
    "simulate": ("rules",),
    "pipelines": ("versions",),
}
# `sql` prints the query's own columns, which no row can list.
FREE = {"sql"}
# A name in backticks; `list`'s (another command's) is not a key.
IDENTIFIER = re.compile(r"`([a-z_]+)`(?!'s)")


def json_commands() -> set[str]:
    """Every command (`pool list` spelt with its group) with a `--json` option."""
    found: set[str] = set()

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None:
                    walk(sub, (*path, name))
        elif any("--json" in p.opts for p in command.params if isinstance(p, click.Option)):
            found.add(" ".join(path))

    walk(cli, ())
    return found


def documented(command: str) -> set[str]:
    """The keys the reference names for COMMAND: the identifiers of its
    `--json` row, or of the section's first paragraph when the row only
    says "a list of objects"; `show` prints what `list` does and more."""
    text = COMMANDS_MD.read_text()
    start = text.index(f"## `orchestrator {command}`\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else None]
    [row] = [line for line in section.splitlines() if line.startswith("| `--json` |")]
    keys = set(IDENTIFIER.findall(row.removeprefix("| `--json` |")))
    if not keys:
        paragraph = section.split("\n\n")[1]
        keys = set(IDENTIFIER.findall(paragraph))
    if command == "show":
        keys |= documented("list")
    return keys


def printed(command: str, value: Any) -> set[str]:
    """The keys COMMAND printed: of the object, or of every object in the
    list, plus the keys of the nested objects its row lists."""
    objects = value if isinstance(value, list) else [value]
    assert objects, f"{command} printed no object to compare"
    keys: set[str] = set()
    for obj in objects:
        assert isinstance(obj, dict), (command, obj)
        keys |= set(obj)
        for name in NESTED.get(command, ()):
            inner = obj[name]
            for item in inner if isinstance(inner, list) else [inner]:
                assert isinstance(item, dict), (command, name, item)
                keys |= set(item)
    return keys


def small_project(project: Project) -> None:
    """Two tasks with one attempt each on their repository branches, at a
    gate of a pooled stage, a hook told of it; t1 halted (so `restore` may
    put its work back), t2 still waiting for approval."""
    make_repo(project.dir)
    worker = ["sh", "-c", 'echo "attempt $ORCHESTRATOR_ATTEMPT" > work.txt']
    verifier = ["sh", "-c", 'echo \'{"pass": true, "score": 0.7, "reasons": ["fine"]}\'']
    write_config(
        project.config,
        '[pipelines.default]\nrepository = "repo"\n\n[pools.shared]\nmax_running = 2\n\n'
        + stage("implement", worker=worker, verifier=verifier, gate=True, pool="shared")
        + '[[hooks]]\non = ["awaiting_approval"]\ncommand = ["true"]\n',
    )
    for args in (
        ("add", "t1", "--title", "First"),
        ("add", "t2", "--title", "Second"),
        ("tick",),
        ("halt", "t1", "--note", "look first"),
    ):
        done = project.run(*args)
        assert done.returncode == 0, (args, done.stderr)


def test_every_json_command_prints_the_keys_its_reference_row_names(project: Project) -> None:
    assert json_commands() - FREE == set(ARGV), "a command with --json the test does not run"
    small_project(project)
    gaps = []
    for command, argv in ARGV.items():
        done = project.run(*argv)
        assert done.returncode == 0, (argv, done.stderr)
        want, got = documented(command), printed(command, json.loads(done.stdout))
        if want != got:
            gaps.append(
                f"{command}: printed, not documented {sorted(got - want)}; "
                f"documented, not printed {sorted(want - got)}"
            )
    assert gaps == [], "\n".join(gaps)
