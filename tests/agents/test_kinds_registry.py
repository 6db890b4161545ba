"""The agent-kind registry is the one place an agent is known: what
`init --agent` offers, the `output` formats, doctor's programs and the
sandbox's paths all come from it, and the agent runtime sits below the
library face, the read side and the MCP door."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from click.testing import CliRunner
from test_structure import PACKAGE, cycles, import_graph

from orchestrator.agents import kinds
from orchestrator.agents.output import OUTPUT_FORMATS, read_output
from orchestrator.agents.recipes import examples_dir, extra_files
from orchestrator.cli import cli
from orchestrator.doctor.agents import KNOWN
from orchestrator.features.sandbox.scaffold import with_sandbox

FOLDERS = ("agents", "api", "views", "mcp")


def test_init_help_lists_exactly_the_registered_kinds() -> None:
    shown = CliRunner().invoke(cli, ["init", "--help"], terminal_width=200).output
    found = re.search(r"--agent \[([^\]]+)\]", shown)
    assert found is not None, shown
    assert tuple(found.group(1).split("|")) == kinds.NAMES == ("claude", "codex", "aider", "script")


def test_names_and_formats_are_unique_and_formats_come_from_the_kinds() -> None:
    assert len(set(kinds.NAMES)) == len(kinds.NAMES)
    formats = [kind.output for kind in kinds.KINDS if kind.output is not None]
    assert len(set(formats)) == len(formats)
    assert OUTPUT_FORMATS == ("text", *formats) == ("text", "claude-json", "codex-jsonl")
    assert kinds.reading("text") is None


def test_every_kind_has_its_recipe_and_its_files() -> None:
    for kind in kinds.KINDS:
        assert (examples_dir() / kind.name / "orchestrator.toml").is_file(), kind.name
        assert [target for _, target in extra_files(kind.name)] == [
            target for _, target in kind.extra_files
        ]


def test_a_kind_that_reads_a_format_parses_it() -> None:
    for kind in kinds.KINDS:
        if kind.output is None:
            assert kind.parse is None and kind.usage_limit is None and kind.resume is None
            continue
        assert kinds.reading(kind.output) is kind
        assert kind.parse is not None
        # Not in its format: the agent's error, never a verdict read from noise.
        assert read_output(kind.output, "not the format\n").error is not None


def test_doctor_and_the_sandbox_ask_the_registry() -> None:
    assert KNOWN == {"claude": (), "codex": ("exec", "e"), "aider": ()}
    recipe = '[pipelines.default]\nworker = ["x", "-s", "read-only"]\n'
    for kind in kinds.KINDS:
        text = with_sandbox(recipe, kind.name)
        for path in (*kind.sandbox_ro, *kind.sandbox_rw):
            assert f'"{path}"' in text, (kind.name, path)
        assert ('"-s", "read-only"' in text) == (kind.in_sandbox is None), kind.name


def test_only_the_kinds_name_an_output_format() -> None:
    """A format compared by its name outside `agents/kinds/` is a kind's
    knowledge that the registry no longer holds alone."""
    formats = set(OUTPUT_FORMATS) - {"text"}
    named: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "agents" / "kinds") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in formats:
                named.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert named == []


def _folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def folder_graph(modules: dict[str, set[str]]) -> dict[str, set[str]]:
    """Which of `FOLDERS` imports which, from the module graph."""
    graph: dict[str, set[str]] = {folder: set() for folder in FOLDERS}
    for module, targets in modules.items():
        here = _folder(module)
        if here not in graph:
            continue
        graph[here] |= {_folder(t) for t in targets if _folder(t) in graph} - {here}
    return graph


def test_no_cycle_among_agents_api_views_and_mcp() -> None:
    graph = folder_graph(import_graph())
    assert graph["agents"] == set(), "the agent runtime imports no face, read side or door"
    assert cycles(graph) == []


def test_the_folder_graph_finds_a_cycle() -> None:
    modules = {
        "orchestrator.agents.x": {"orchestrator.api.y"},
        "orchestrator.api.y": {"orchestrator.agents.x", "orchestrator.tick.z"},
    }
    assert cycles(folder_graph(modules)) == [["agents", "api"]]


def test_the_registry_is_one_tuple_of_kind_modules() -> None:
    source = Path(kinds.__file__).read_text(encoding="utf-8")
    assert re.search(r"^KINDS: tuple\[AgentKind, \.\.\.\] = \(", source, re.MULTILINE)
    modules = sorted(p.stem for p in Path(kinds.__file__).parent.glob("*.py"))
    assert modules == sorted(["__init__", *kinds.NAMES])
