"""`[pools.NAME]` and a stage's `pool`: read, checked, and in every agent recipe."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.agents.kinds import NAMES as AGENTS
from orchestrator.agents.recipes import recipe_text
from orchestrator.config import load_settings
from orchestrator.errors import ConfigError
from orchestrator.features.pools.config import PoolConfig

STAGE = """
[[pipelines.default.stages]]
name = "work"
pool = "{pool}"
worker = ["true"]
"""


def load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "orchestrator.toml"
    path.write_text(text)
    return load_settings(config=path)


def test_a_pool_is_read_with_its_caps(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        "[pools.claude]\nmax_running = 2\nmax_usd_per_day = 12.5\nmax_pause = 600\n"
        + STAGE.format(pool="claude"),
    )
    assert settings.pools["claude"] == PoolConfig("claude", 2, 12.5, 600.0)
    assert settings.pipelines["default"].stages[0].pool == "claude"


def test_an_unknown_pool_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, "[pools.claude]\n" + STAGE.format(pool="cluade"))
    assert caught.value.exit_code == 78
    message = str(caught.value)
    assert "stages[0] (work).pool" in message and "unknown pool 'cluade'" in message


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ("max_running = 0", "an integer >= 1"),
        ("max_usd_per_day = -1", "max_usd_per_day"),
        ("max_pause = 0", "max_pause"),
        ("max_runing = 2", "did you mean 'max_running'"),
    ],
)
def test_bad_pool_keys_are_refused(tmp_path: Path, table: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        load(tmp_path, f"[pools.claude]\n{table}\n" + STAGE.format(pool="claude"))


def test_the_exponential_pause_doubles_up_to_max_pause() -> None:
    pool = PoolConfig("p", max_pause=300.0)
    assert [pool.pause_for(n) for n in (1, 2, 3, 4)] == [60.0, 120.0, 240.0, 300.0]


@pytest.mark.parametrize("agent", AGENTS)
def test_every_recipe_puts_its_stages_in_a_pool_named_after_the_agent(
    tmp_path: Path, agent: str
) -> None:
    for name in ("judges", "prompts"):
        (tmp_path / name).mkdir()
    settings = load(tmp_path, recipe_text(agent))
    assert set(settings.pools) == {agent}
    stages = [s for p in settings.pipelines.values() for s in p.stages]
    assert stages and {s.pool for s in stages} == {agent}
