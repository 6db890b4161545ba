"""The reference's key tables are the Sections, rendered; the Sections drive the reader."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config import load_settings
from orchestrator.config.core import schema
from orchestrator.config.docs import main, render, tables
from orchestrator.config.schema import STAGE_KEY, Bool, Integer, Key, Section
from orchestrator.config.sections import FEATURE_SECTIONS
from orchestrator.errors import ConfigError
from orchestrator.features import FEATURES

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "configuration.md"

TOY: Section[None] = Section(
    name="toy",
    keys=(
        Key("wobble", Integer(2, maximum=9), 3, "how much it wobbles", STAGE_KEY),
        Key("loud", Bool(), False, "whether it says so", STAGE_KEY, shown="(quiet)"),
    ),
)


def test_the_page_is_what_the_sections_render() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert render(page, schema(FEATURE_SECTIONS)) == page, (
        "run `python -m orchestrator.config.docs --write`"
    )


def test_a_new_key_gets_its_row_with_its_default_and_doc() -> None:
    page = PAGE.read_text(encoding="utf-8")
    made = render(page, schema((*FEATURE_SECTIONS, TOY)))
    assert made != page
    assert "| `wobble` | yes | `3` | how much it wobbles |" in made
    assert "| `loud` | yes | (quiet) | whether it says so |" in made


def test_a_marker_without_a_table_is_refused() -> None:
    page = PAGE.read_text(encoding="utf-8") + "\n<!-- generated: nothing -->\n<!-- end -->\n"
    with pytest.raises(ValueError, match="'nothing'"):
        render(page, schema(FEATURE_SECTIONS))


def test_a_table_without_a_marker_is_refused() -> None:
    page = PAGE.read_text(encoding="utf-8").replace("<!-- generated: hooks keys -->\n", "")
    with pytest.raises(ValueError, match="hooks keys"):
        render(page, schema(FEATURE_SECTIONS))


def test_every_table_of_the_file_has_a_marker() -> None:
    assert set(tables(schema(FEATURE_SECTIONS))) == {
        "top tables",
        "orchestrator keys",
        "pipeline keys",
        "stage keys",
        "plateau keys",
        "backoff keys",
        "pools keys",
        "hooks keys",
        *(f"{section.table} keys" for section in _feature_tables()),
    }


def _feature_tables() -> list[Section[Any]]:
    """The top-level tables the feature packages declare (`Feature.config`):
    each one's place in the page comes with its feature."""
    return [s for f in FEATURES for s in f.config if s.table is not None]


def test_the_command_reports_a_stale_page_and_rewrites_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = PAGE.read_text(encoding="utf-8")
    stale = tmp_path / "configuration.md"
    stale.write_text(page.replace("| `gate` | yes |", "| `gate` | no |"), encoding="utf-8")
    assert main(["--page", str(stale)]) == 1
    assert "--write" in capsys.readouterr().err
    assert main(["--page", str(stale), "--write"]) == 0
    assert stale.read_text(encoding="utf-8") == page
    assert main(["--page", str(stale)]) == 0


STAGE_TOML = """
[defaults]
{defaults}

[pipelines.p]
[[pipelines.p.stages]]
name = "s"
worker = ["true"]
{stage}
"""


def test_a_sections_key_is_read_checked_and_inherited(tmp_path: Path) -> None:
    """A feature's Section is all the reader needs: the key is accepted in
    [defaults] and a stage, inherited, checked against its kind."""
    config = tmp_path / "orchestrator.toml"
    toy = dataclasses.replace(TOY, keys=TOY.keys)

    def load(defaults: str, stage: str) -> dict[str, object]:
        config.write_text(STAGE_TOML.format(defaults=defaults, stage=stage), encoding="utf-8")
        seen: dict[str, object] = {}

        def build(values: Mapping[str, object]) -> None:
            seen.update((name, values[name]) for name in ("wobble", "loud"))

        section = dataclasses.replace(toy, build=build, field="toy")
        with pytest.raises(TypeError, match="toy"):
            # StageConfig has no `toy` field: the values were read before it was built.
            load_settings(config=config, sections=(*FEATURE_SECTIONS, section))
        return seen

    assert load("wobble = 5", "") == {"wobble": 5, "loud": False}
    assert load("wobble = 5", "wobble = 4\nloud = true") == {"wobble": 4, "loud": True}
    for bad, problem in (
        ("wobble = 1", "expected an integer >= 2, got 1"),
        ("wobble = 10", "at most 9, not 10"),
    ):
        config.write_text(STAGE_TOML.format(defaults=bad, stage=""), encoding="utf-8")
        with pytest.raises(ConfigError, match=f"defaults.wobble: {problem}"):
            load_settings(config=config, sections=(*FEATURE_SECTIONS, TOY))


def test_without_its_section_a_features_key_is_unknown(tmp_path: Path) -> None:
    config = tmp_path / "orchestrator.toml"
    config.write_text(STAGE_TOML.format(defaults="", stage="on_halt = 'best'"), encoding="utf-8")
    assert load_settings(config=config).pipelines["p"].stages[0].on_halt == "best"
    others = tuple(s for s in FEATURE_SECTIONS if s.name != "restore")
    with pytest.raises(ConfigError, match=r"stages\[0\] \(s\)\.on_halt: unknown key"):
        load_settings(config=config, sections=others)


def test_the_unknown_key_lists_keep_their_order() -> None:
    """The order the unknown-key error lists a table's keys in is the
    Sections' order: the engine's, then FEATURE_SECTIONS'."""
    the_schema = schema(FEATURE_SECTIONS)
    assert the_schema.top() == (
        *("orchestrator", "defaults", "pipelines", "hooks", "pools"),
        *(section.table for section in _feature_tables()),
    )
    assert the_schema.allowed("stage") == (
        *("name", "gate", "worker", "verifier", "stdin", "prompt", "env", "max_attempts"),
        *("timeout_seconds", "pass_score", "plateau", "worker_ok_exit", "pool", "candidates"),
        *("output", "verifier_output", "max_cost_usd", "secrets", "memory_mb"),
        "strict_verdict",
        *("halt_after_no_change", "retry_exit_codes", "backoff", "pending_timeout", "sandbox"),
        *("sandbox_ro", "sandbox_rw", "sandbox_network", "sandbox_tmp_mb", "resume"),
        *("on_halt", "verifier_samples"),
        *feature_keys("stage"),
    )
    assert the_schema.allowed("pipeline") == (
        *("setup", "stages", "repository", "base", "commit_author", "keep_worktree_days"),
        *("land", "land_check", "land_to", "land_timeout", "max_land_sendbacks"),
        *("land_secrets", "remote", "sandbox", "sandbox_ro", "sandbox_rw", "sandbox_network"),
        "sandbox_tmp_mb",
        *feature_keys("pipeline"),
    )


def feature_keys(scope: str) -> tuple[str, ...]:
    """The keys the feature packages declare (`Feature.config`), after the
    engine's, in registration order."""
    return tuple(name for f in FEATURES for s in f.config for name in s.names(scope))


@pytest.mark.parametrize(
    "module",
    [
        "orchestrator.agents.config",
        "orchestrator.events.hooks",
        "orchestrator.guards.config",
        "orchestrator.features.landing.config",
        "orchestrator.config.docs",
    ],
)
def test_a_module_that_declares_keys_imports_first(module: str, tmp_path: Path) -> None:
    """A Section's module imports `config.schema`, which runs the config
    package first: nothing there may need the Section's module half-loaded."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import {module}; import orchestrator.config; orchestrator.config.load_settings()",
        ],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
