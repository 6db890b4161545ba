"""`orchestrator mcp` as a real process, driven by the official MCP SDK's
client over stdio: the tools it lists, what they read, the subtask it adds,
and the human commands it does not have."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from support import FAKES, Project, check_invariants

pytestmark = pytest.mark.e2e

HUMAN = {"approve", "reject", "halt", "resume", "cancel"}
AGENT = [sys.executable, str(FAKES / "agent.py")]
PASS = [*AGENT, "--pass", "--score", "1.0"]


def stage(pipeline: str, worker: list[str], gate: bool = False) -> str:
    return (
        f'[[pipelines.{pipeline}.stages]]\nname = "work"\nworker = {json.dumps(worker)}\n'
        f"verifier = {json.dumps(PASS)}\ngate = {str(gate).lower()}\n\n"
    )


def wait_for_file(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"timed out waiting for {path}"
        time.sleep(0.05)


async def _session(
    project: Project, env: dict[str, str], calls: list[tuple[str, dict[str, Any]]]
) -> tuple[list[str], list[Any]]:
    params = StdioServerParameters(
        command=sys.executable,
        # As the recipe's MCP config names it: the config on the command line.
        args=["-m", "orchestrator", "--config", str(project.config), "mcp"],
        env=env,
        cwd=str(project.dir),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = [tool.name for tool in (await session.list_tools()).tools]
        results = [await session.call_tool(name, arguments) for name, arguments in calls]
    return tools, results


def call(
    project: Project, calls: list[tuple[str, dict[str, Any]]], **env: str
) -> tuple[list[str], list[Any]]:
    # Like an attempt's environment: none of the tick's ORCHESTRATOR_* names
    # but the ones it sets; the database comes from the config.
    base = {k: v for k, v in project.process_env().items() if not k.startswith("ORCHESTRATOR_")}
    return asyncio.run(asyncio.wait_for(_session(project, {**base, **env}, calls), 120))


def text_of(result: Any) -> str:
    return "".join(part.text for part in result.content if getattr(part, "text", None))


@pytest.fixture
def backend() -> str:
    return "sqlite"  # the database is the config's: SQLite beside it


def test_the_tools_read_and_nothing_human_is_offered(project: Project) -> None:
    project.write_config(stage("default", ["true"], gate=True), database=project.db_url)
    assert project.run("add", "a", "--title", "First").returncode == 0
    assert project.run("tick").returncode == 0  # a now waits at its gate
    tools, results = call(
        project,
        [
            ("list_tasks", {}),
            ("show_task", {"slug": "a"}),
            ("task_history", {"slug": "a", "limit": 2}),
            ("explain", {"slug": "a"}),
            ("approve", {"slug": "a"}),
            ("add_subtask", {"title": "Outside any attempt"}),
        ],
    )
    assert sorted(tools) == ["add_subtask", "explain", "list_tasks", "show_task", "task_history"]
    assert not HUMAN & set(tools)
    listed, shown, history, explained, approve, outside = results
    assert [t["slug"] for t in json.loads(text_of(listed))["tasks"]] == ["a"]
    assert json.loads(text_of(shown))["state"] == "work:awaiting_approval"
    assert "approval_hash" not in json.loads(text_of(shown))
    assert len(json.loads(text_of(history))["transitions"]) == 2
    assert "approve" in json.loads(text_of(explained))["next_tick"]
    assert approve.is_error
    assert "approve" in text_of(approve).lower()
    assert outside.is_error
    assert "only inside an attempt" in text_of(outside)
    assert project.state("a") == "work:awaiting_approval"  # nothing approved it
    assert project.query("SELECT count(*) FROM tasks") == [(1,)]


def test_add_subtask_from_inside_a_running_attempt(project: Project, tmp_path: Path) -> None:
    release, pidfile = tmp_path / "release", tmp_path / "pid"
    project.write_config(
        stage("slow", [*AGENT, "--pidfile", str(pidfile), "--wait-file", str(release)])
        + stage("default", ["true"]),
        database=project.db_url,
    )
    assert project.run("add", "parent", "--title", "Big", "--pipeline", "slow").returncode == 0
    assert project.run("add", "other", "--title", "Other", "--pipeline", "slow").returncode == 0
    # Not running: a stale ORCHESTRATOR_TASK adds nothing.
    _, [stale] = call(project, [("add_subtask", {"title": "x"})], ORCHESTRATOR_TASK="other")
    assert stale.is_error
    assert "not running an attempt" in text_of(stale)
    tick = project.popen("tick", "--max-tasks", "1")
    try:
        wait_for_file(pidfile)
        _, results = call(
            project,
            [
                ("add_subtask", {"title": "First half"}),
                ("add_subtask", {"title": "Second half", "slug": "half-2", "after": ["parent-1"]}),
                ("add_subtask", {"title": "Loop", "slug": "loop", "after": ["loop"]}),
                ("add_subtask", {"title": "Bad", "slug": "Bad Slug"}),
                # Another pipeline (one with no gate, no sandbox), or ahead of the queue.
                ("add_subtask", {"title": "Away", "slug": "away", "pipeline": "default"}),
                ("add_subtask", {"title": "First!", "slug": "first", "priority": 1}),
            ],
            ORCHESTRATOR_TASK="parent",
        )
    finally:
        release.write_text("go")
        _, err = tick.communicate(timeout=60)
    assert tick.returncode == 0, err
    first, second, loop, bad, away, jump = results
    assert not first.is_error, text_of(first)
    assert json.loads(text_of(first)) == {
        "added": "parent-1",
        "parent": "parent",
        "pipeline": "slow",  # the parent's
        "priority": 0,  # the parent's
        "after": [],
        "state": "work",
    }
    assert json.loads(text_of(second))["after"] == ["parent-1"]
    assert loop.is_error
    assert "cannot wait on itself" in text_of(loop)
    assert bad.is_error
    assert away.is_error and "parent's pipeline" in text_of(away)
    assert jump.is_error and "at most its parent's (0)" in text_of(jump)
    shown = json.loads(project.run("show", "parent", "--json").stdout)
    assert shown["subtasks"] == ["parent-1", "half-2"]
    child = json.loads(project.run("show", "half-2", "--json").stdout)
    assert child["parent"] == "parent"
    assert child["after"] == [{"slug": "parent-1", "state": "work"}]
    actor = project.query(
        "SELECT r.actor FROM transitions r JOIN tasks t ON t.id = r.task_id "
        "WHERE t.slug = 'parent-1'"
    )
    assert actor == [("agent:parent",)]
    assert check_invariants(project.db_url) == []


def test_a_task_adds_at_most_max_subtasks(project: Project, tmp_path: Path) -> None:
    """One answer cannot flood the queue: the door refuses a subtask beyond
    the bound, saying so, and adds nothing for it."""
    from orchestrator.mcp.door import MAX_SUBTASKS

    release, pidfile = tmp_path / "release", tmp_path / "pid"
    project.write_config(
        stage("slow", [*AGENT, "--pidfile", str(pidfile), "--wait-file", str(release)]),
        database=project.db_url,
    )
    assert project.run("add", "parent", "--title", "Big", "--pipeline", "slow").returncode == 0
    tick = project.popen("tick", "--max-tasks", "1")
    try:
        wait_for_file(pidfile)
        calls = [("add_subtask", {"title": f"Part {n}"}) for n in range(MAX_SUBTASKS + 1)]
        _, results = call(project, calls, ORCHESTRATOR_TASK="parent")
    finally:
        release.write_text("go")
        _, err = tick.communicate(timeout=60)
    assert tick.returncode == 0, err
    *added, refused = results
    assert not any(result.is_error for result in added)
    assert refused.is_error and "the most a task may have" in text_of(refused)
    shown = json.loads(project.run("show", "parent", "--json").stdout)
    assert len(shown["subtasks"]) == MAX_SUBTASKS
