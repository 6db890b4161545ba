"""What a feature declares besides its tick hooks reaches the engine with no
engine edit: its CLI verbs (`Feature.commands`), its config keys
(`Feature.config`, an extension `Section`), its `explain` view
(`Feature.explain`)."""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from e2e.e2e_support import stage
from support import Project

from orchestrator import compose
from orchestrator.cli.group import OrchestratorGroup
from orchestrator.config import load_settings
from orchestrator.config.schema import STAGE_KEY, Checks, Integer, Key, Section
from orchestrator.config.sections import FEATURE_SECTIONS
from orchestrator.errors import ConfigError
from orchestrator.ext.hooks import Feature
from orchestrator.ext.views import Explained


@dataclass(frozen=True)
class Wobble:
    amount: int


def _read_toys(checks: Checks, value: object) -> object:
    return {} if value is None else checks.table(value, "toys", ("colour",))


TOY = Section[Wobble](
    name="toy",
    keys=(Key("wobble", Integer(2, maximum=9), 3, "how much it wobbles", STAGE_KEY),),
    build=lambda values: Wobble(values["wobble"]),
    extension=True,
)
TOYS = Section[None](name="toys", keys=(), table="toys", read_table=_read_toys, extension=True)

CONFIG = """
[defaults]
wobble = 5

[pipelines.p]
stages = [{name = "s", worker = ["true"]}, {name = "t", worker = ["true"], wobble = 7}]
"""


@click.command()
def toyverb() -> None:
    """A toy feature's verb."""
    click.echo("toy verb ran")


@pytest.fixture
def toy_module() -> Iterator[str]:
    """A module a feature's "module:attr" names, as a package's would be."""
    module = types.ModuleType("toy_feature_face")
    module.toyverb = toyverb  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    yield module.__name__
    del sys.modules[module.__name__]


def test_a_features_verb_is_a_command_of_the_root_group(
    toy_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        compose, "FEATURES", (Feature("toy", commands={"toyverb": f"{toy_module}:toyverb"}),)
    )
    verbs = compose.commands({"list": "orchestrator.cli.tasks:list_"})
    assert verbs == {"list": "orchestrator.cli.tasks:list_", "toyverb": f"{toy_module}:toyverb"}
    group = OrchestratorGroup(name="cli", lazy_subcommands=verbs)
    result = CliRunner().invoke(group, ["toyverb"])
    assert result.exit_code == 0, result.output
    assert result.output == "toy verb ran\n"
    assert "toyverb" in CliRunner().invoke(group, ["--help"]).output


def test_a_verb_taken_twice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compose, "FEATURES", (Feature("toy", commands={"list": "x:y"}),))
    with pytest.raises(RuntimeError, match="feature 'toy': command 'list' is taken"):
        compose.commands({"list": "orchestrator.cli.tasks:list_"})


def test_the_real_features_verbs_are_the_root_groups() -> None:
    from orchestrator.cli import COMMANDS, cli

    declared = {name for f in compose.FEATURES for name in f.commands}
    assert set(cli.commands) == set(COMMANDS) | declared


def test_an_extension_sections_keys_are_read_into_extras(tmp_path: Path) -> None:
    config = tmp_path / "orchestrator.toml"
    config.write_text(CONFIG + '\n[toys]\ncolour = "red"\n', encoding="utf-8")
    settings = load_settings(config=config, sections=(*FEATURE_SECTIONS, TOY, TOYS))
    first, second = settings.pipelines["p"].stages
    assert TOY.of(first) == Wobble(5)  # inherited from [defaults]
    assert TOY.of(second) == Wobble(7)
    assert TOYS.table_of(settings) == {"colour": "red"}
    # A stage made without the section holds the defaults' build.
    config.write_text(CONFIG.replace("wobble = 5", "").replace(", wobble = 7", ""), "utf-8")
    plain = load_settings(config=config)
    assert TOY.of(plain.pipelines["p"].stages[0]) == Wobble(3)


def test_an_extension_sections_bad_value_names_its_key(tmp_path: Path) -> None:
    config = tmp_path / "orchestrator.toml"
    config.write_text(CONFIG.replace("wobble = 7", "wobble = 12"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\(t\)\.wobble: .*at most 9, not 12"):
        load_settings(config=config, sections=(*FEATURE_SECTIONS, TOY))
    # Without the section the key is unknown: the feature owns it.
    with pytest.raises(ConfigError, match=r"wobble: unknown key"):
        load_settings(config=config)


def _explain_toy(conn: object, settings: object, task: object) -> Explained | None:
    slug = getattr(task, "slug", "")
    if slug != "t1":
        return None
    return Explained("toy", {"wobbles": 3}, ("toy       wobbles 3 times",))


def test_a_features_explain_view_adds_its_key_and_lines(
    project: Project, toy_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sys.modules[toy_module].explain = _explain_toy  # type: ignore[attr-defined]
    project.write_config(stage("work", worker=["true"], verifier=["true"]))
    for slug in ("t1", "t2"):
        assert project.cli("add", slug, "--title", "t").exit_code == 0
    plain = json.loads(project.cli("explain", "t1", "--json").output)
    monkeypatch.setattr(compose, "FEATURES", (Feature("toy", explain=f"{toy_module}:explain"),))
    told = json.loads(project.cli("explain", "t1", "--json").output)
    assert told == {
        **plain,
        "now": told["now"],
        "toy": {"wobbles": 3},
        "notes": ["toy       wobbles 3 times"],
    }
    assert "  toy       wobbles 3 times" in project.cli("explain", "t1").output.splitlines()
    # A task the feature has nothing to say of: the engine's keys alone.
    quiet = json.loads(project.cli("explain", "t2", "--json").output)
    assert set(quiet) == set(plain)
