"""`init --agent NAME --sandbox`: every recipe loads with its pipeline (and
so its setup and every stage) inside bubblewrap and the agent's folders
mapped; Codex's own sandbox is off; `--sandbox` alone is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.agents.kinds import NAMES as AGENTS
from orchestrator.cli import cli
from orchestrator.config import load_settings


def init(folder: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli,
        ["--config", str(folder / "orchestrator.toml"), "init", *args],
        env={"ORCHESTRATOR_DB_URL": None},
        catch_exceptions=False,
    )
    return result.exit_code, result.output


@pytest.mark.parametrize("agent", AGENTS)
def test_every_recipe_runs_sandboxed(tmp_path: Path, agent: str) -> None:
    code, out = init(tmp_path, "--agent", agent, "--sandbox")
    assert code == 0, out
    settings = load_settings(config=tmp_path / "orchestrator.toml", db_url=None, environ={})
    pipeline = settings.pipelines["default"]
    assert pipeline.sandbox.mode == "bwrap"
    for stage in pipeline.stages:
        assert stage.sandbox == pipeline.sandbox
    if agent == "claude":
        assert {"~/.claude", "~/.claude.json"} <= set(pipeline.sandbox.rw)
    if agent == "codex":
        assert "~/.codex" in pipeline.sandbox.rw
        workers = [s.worker for s in pipeline.stages if s.worker]
        assert all(w[w.index("-s") + 1] == "danger-full-access" for w in workers)


def test_a_stage_sets_its_own_sandbox_over_its_pipeline(tmp_path: Path) -> None:
    config = tmp_path / "orchestrator.toml"
    config.write_text(
        "[defaults]\nsandbox_network = false\n"
        '[pipelines.p]\nsandbox = "bwrap"\nsandbox_ro = ["~/.x"]\n'
        '[[pipelines.p.stages]]\nname = "a"\nworker = ["true"]\n'
        '[[pipelines.p.stages]]\nname = "b"\nworker = ["true"]\nsandbox = "none"\n'
    )
    pipeline = load_settings(config=config, db_url=None, environ={}).pipelines["p"]
    first, second = pipeline.stages
    assert (first.sandbox.mode, first.sandbox.ro, first.sandbox.network) == (
        "bwrap",
        ("~/.x",),
        False,
    )
    assert second.sandbox.mode == "none"


def test_sandbox_needs_an_agent(tmp_path: Path) -> None:
    code, out = init(tmp_path, "--sandbox")
    assert code == 1
    assert "--sandbox needs --agent" in out
    assert not (tmp_path / "orchestrator.toml").exists()
