"""A usage limit met by the REAL agent CLIs (Claude Code 2.1.197, Codex
CLI 0.171.0) through real ticks: the scripted model server answers 429 with
the headers and body each API sends; the CLI prints its error; the tick
records the attempt `backoff`, pauses the recipe's pool, claims nothing for
it while paused, and after `pool resume` every task runs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from stub_model import Script, StubModel
from test_real_agents import RESEARCH, AgentProject

pytestmark = pytest.mark.e2e

RESEARCH_SCRIPT = Script(
    file_name="RESEARCH.md",
    content=RESEARCH,
    final='Done.\n\n```json\n{"pass": true, "score": 0.9, "reasons": ["ok"]}\n```\n',
)


def limited_run(project: AgentProject, pool: str) -> dict[str, object]:
    """Two tasks; the first model call answers 429. Returns the pause."""
    project.run("add", "t1", "--title", "first")
    project.run("add", "t2", "--title", "second")
    project.stub.script = RESEARCH_SCRIPT
    project.stub.limited = 1
    before = datetime.now(UTC)
    out = project.run("tick", "--jobs", "1").stdout
    assert f"pool {pool} paused until" in out, out
    assert project.stub.limited == 0  # the 429 was sent, and seen
    (attempt,) = project.attempts("t1")
    assert attempt["outcome"] == "backoff" and attempt["pool"] == pool
    assert "usage limit" in attempt["error"]
    assert project.attempts("t2") == []  # never claimed against the wall
    ((until, reason, streak),) = project.query(
        "SELECT paused_until, pause_reason, pause_streak FROM pools WHERE name = ?", pool
    )
    paused_until = datetime.fromisoformat(until).replace(tzinfo=UTC)
    data = json.loads(project.run("explain", "t2", "--json").stdout)
    assert data["pool"]["paused"] and "is paused until" in data["next_tick"]
    # A tick during the pause claims nothing for the pool.
    assert "attempt" not in project.run("tick", "--jobs", "1").stdout.split("tick:")[0]
    assert len(project.attempts("t1")) == 1 and project.attempts("t2") == []
    assert [k for (k,) in project.query("SELECT kind FROM events")] == ["pool_paused"]
    project.run("pool", "resume", pool)
    # Both run now, through the real CLI again (whether the agent's edit
    # lands is the recipe tests' business: Codex's sandbox may refuse it here).
    out = project.run("tick", "--task", "t1", "--max-tasks", "1").stdout
    out += project.run("tick", "--task", "t2", "--max-tasks", "1").stdout
    assert "t1: research attempt 2 " in out and "t2: research attempt 1 " in out, out
    for slug in ("t1", "t2"):
        assert project.attempts(slug)[-1]["outcome"] in ("passed", "failed"), slug
    return {"before": before, "until": paused_until, "reason": reason, "streak": streak}


def test_claude_codes_429_pauses_the_pool_for_the_exponential_wait(
    tmp_path: Path, claude_bin: Path, stub: StubModel
) -> None:
    project = AgentProject(tmp_path, "claude", claude_bin.parent, stub)
    pause = limited_run(project, "claude")
    # Claude Code prints no reset time: the first exponential wait, 60 s.
    wait = pause["until"] - pause["before"]  # type: ignore[operator]
    assert timedelta(seconds=55) < wait < timedelta(seconds=90)
    assert "Request rejected (429)" in str(pause["reason"]) and pause["streak"] == 1


def test_codexs_usage_limit_pauses_the_pool_until_its_try_again_at(
    tmp_path: Path, codex_bin: Path, stub: StubModel
) -> None:
    project = AgentProject(tmp_path, "codex", codex_bin.parent, stub)
    codex_home = project.home / ".codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(
        'model = "gpt-stub"\n'
        'model_provider = "stub"\n'
        "[analytics]\nenabled = false\n"
        "[features]\nplugins = false\n"
        "[model_providers.stub]\n"
        'name = "stub"\n'
        f'base_url = "{stub.url}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "OPENAI_API_KEY"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
    )
    stub.reset_seconds = 600
    pause = limited_run(project, "codex")
    # "try again at H:MM PM": that minute's end, ten minutes on.
    reset = pause["before"] + timedelta(seconds=600)  # type: ignore[operator]
    until = pause["until"]
    assert isinstance(until, datetime)
    assert reset - timedelta(minutes=1) <= until <= reset + timedelta(minutes=2)
    assert until.second == 0 and "try again at" in str(pause["reason"])
    assert pause["streak"] == 0  # a known reset is no step of the exponential wait
