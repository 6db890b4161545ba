"""The MCP door from inside bubblewrap (issue #35 item 9).

A fake agent runs as a sandboxed worker under a real tick and starts the
server as the recipe's `mcp.json` names it, then calls the tools through
the official MCP SDK. The project folder, its config and its database are
under a home the sandbox hides: the door must work without them (the tick's
socket for the attempt), keep the subtask on its parent's pipeline at no
higher priority, and read nothing of another task.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import FAKES, Project, check_invariants, make_project

from orchestrator.features.sandbox.bwrap import bwrap_program
from orchestrator.mcp.recipe import mcp_config

pytestmark = pytest.mark.e2e

PYTHON = os.path.realpath(sys.base_prefix)
VENV = os.path.realpath(sys.prefix)
PASS = [sys.executable, str(FAKES / "agent.py"), "--pass", "--score", "1.0"]

# The fake agent: the MCP server as mcp.json names it, the tools called in
# turn, what each answered written to the worktree.
AGENT = """\
import asyncio, json, os, sys
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

server = json.load(open(sys.argv[1]))["mcpServers"]["orchestrator"]
calls = json.load(open(sys.argv[2]))
# Masked as /dev/null (a character device), or absent: not the database.
seen = {"database_visible": os.path.isfile(sys.argv[3]), "results": []}

async def main():
    params = StdioServerParameters(
        command=server["command"], args=server["args"], env=dict(os.environ)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for name, arguments in calls:
            result = await session.call_tool(name, arguments)
            text = "".join(p.text for p in result.content if getattr(p, "text", None))
            seen["results"].append({"error": bool(result.is_error), "text": text})

asyncio.run(asyncio.wait_for(main(), 90))
open("mcp-results.json", "w").write(json.dumps(seen))
"""

CALLS = [
    ["add_subtask", {"title": "First half"}],
    ["add_subtask", {"title": "Elsewhere", "slug": "away", "pipeline": "open"}],
    ["add_subtask", {"title": "Urgent", "slug": "urgent", "priority": 6}],
    ["add_subtask", {"title": "Later", "slug": "later", "priority": 1, "after": ["parent-1"]}],
    ["show_task", {"slug": "parent"}],
    ["show_task", {"slug": "bystander"}],
    ["list_tasks", {}],
]


@pytest.fixture(autouse=True)
def _needs_bwrap() -> None:
    if bwrap_program() is None and not os.environ.get("CI"):
        pytest.skip("bubblewrap (bwrap) is not installed")


@pytest.fixture
def home() -> Iterator[Path]:
    """Outside /tmp (the sandbox's own): what hides it is the home's tmpfs."""
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() else None
    folder = Path(tempfile.mkdtemp(prefix="orch-home-", dir=base))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_add_subtask_from_inside_the_sandbox_without_the_database(
    home: Path, tmp_path: Path
) -> None:
    folder = home / "proj"
    (home / "data").mkdir()
    database = home / "data" / "o.db"  # hidden, whatever the sandbox binds of the project
    tools = tmp_path / "agent"  # visible inside: bound read-only
    tools.mkdir()
    (tools / "agent.py").write_text(AGENT)
    (tools / "calls.json").write_text(json.dumps(CALLS))
    worker = [
        sys.executable,
        str(tools / "agent.py"),
        str(tools / "mcp.json"),
        str(tools / "calls.json"),
        str(database),
    ]
    ro = [PYTHON, VENV, str(tools)]
    stages = (
        '[[pipelines.default.stages]]\nname = "work"\nsandbox = "bwrap"\n'
        f"sandbox_ro = {json.dumps(ro)}\nworker = {json.dumps(worker)}\n"
        f"verifier = {json.dumps(PASS)}\n\n"
        '[[pipelines.open.stages]]\nname = "work"\nworker = ["true"]\n'
        f"verifier = {json.dumps(PASS)}\n"
    )
    url = f"sqlite:///{database}"
    project: Project = make_project(folder, url, stages, database=url)
    project.env["HOME"] = str(home)
    (tools / "mcp.json").write_text(mcp_config(project.config))
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "parent", "--title", "Big", "--priority", "5").returncode == 0
    assert project.run("add", "bystander", "--title", "Not yours").returncode == 0
    done = project.run("tick", "--max-tasks", "1", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    out = project.dir / "tasks" / "parent" / "mcp-results.json"
    err = project.dir / "state" / "parent" / "work-001" / "worker.err"
    assert out.exists(), err.read_text() if err.exists() else done.stdout
    seen = json.loads(out.read_text())
    assert seen["database_visible"] is False
    first, away, urgent, later, parent, bystander, listed = seen["results"]
    assert not first["error"], first
    assert json.loads(first["text"])["added"] == "parent-1"
    assert json.loads(first["text"])["priority"] == 5  # the parent's
    assert away["error"] and "parent's pipeline" in away["text"], away
    assert urgent["error"] and "at most its parent's" in urgent["text"], urgent
    assert not later["error"], later
    assert json.loads(parent["text"])["slug"] == "parent"
    assert bystander["error"], bystander
    assert sorted(t["slug"] for t in json.loads(listed["text"])["tasks"]) == [
        "later",
        "parent",
        "parent-1",
    ]
    rows = project.query("SELECT slug, pipeline, priority FROM tasks ORDER BY id")
    assert rows == [
        ("parent", "default", 5),
        ("bystander", "default", 0),
        ("parent-1", "default", 5),
        ("later", "default", 1),
    ]
    actors = project.query(
        "SELECT DISTINCT r.actor FROM transitions r JOIN tasks t ON t.id = r.task_id "
        "WHERE t.slug IN ('parent-1', 'later')"
    )
    assert actors == [("agent:parent",)]
    assert check_invariants(project.db_url) == []
