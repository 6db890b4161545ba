"""`resume = true` with the real Claude Code CLI against the scripted model
server: the second attempt resumes the first attempt's session (its first
request carries the earlier conversation), and a session that is gone
starts afresh within the same attempt, counted once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stub_model import Script, StubModel
from test_real_agents import AgentProject

FAIL = 'Not yet.\n\n```json\n{"pass": false, "score": 0.2, "next_hint": "try harder"}\n```\n'
PASS = 'Done.\n\n```json\n{"pass": true, "score": 0.9, "reasons": ["ok"]}\n```\n'
CONFIG = """
[orchestrator]
workspace_root = "tasks"
state_root = "state"
lock_file = "orchestrator.lock"
retry_interval = 0
env_deny = ["ANTHROPIC_API_KEY"]

[[pipelines.default.stages]]
name = "work"
worker = ["claude", "-p", "--output-format", "json", "--permission-mode", "acceptEdits"]
stdin = "prompt"
prompt = "prompts/implement.md"
output = "claude-json"
secrets = ["ANTHROPIC_API_KEY"]
resume = true
max_attempts = 3
"""


def project_with_resume(tmp_path: Path, claude_bin: Path, stub: StubModel) -> AgentProject:
    project = AgentProject(tmp_path, "claude", claude_bin.parent, stub)
    (project.dir / "orchestrator.toml").write_text(CONFIG)
    project.run("add", "t1", "--title", "Resume me", "--body", "The first attempt's words.")
    stub.script = Script(file_name="NOTE.md", content="one\n", final=FAIL)
    assert "work attempt 1 failed" in project.tick()
    return project


def first_requests(stub: StubModel, since: int) -> list[dict[str, Any]]:
    """The agent's main-loop requests (those offering tools) after `since`."""
    return [body for body in stub.posts("/v1/messages")[since:] if body.get("tools")]


def test_the_second_attempt_resumes_the_first_session(
    tmp_path: Path, claude_bin: Path, stub: StubModel
) -> None:
    project = project_with_resume(tmp_path, claude_bin, stub)
    [first] = project.attempts("t1")
    assert first["session_id"]
    seen = len(stub.posts("/v1/messages"))
    stub.script = Script(file_name="NOTE.md", content="two\n", final=PASS)
    assert "work attempt 2 passed" in project.tick()
    opening = first_requests(stub, seen)[0]
    said = str(opening["messages"])
    assert [m for m in opening["messages"] if m.get("role") == "assistant"]  # so far
    assert "The first attempt" in said and "Not yet." in said
    assert not (project.dir / "state" / "t1" / "work-002" / "resume.txt").exists()


def test_a_gone_session_starts_afresh_in_the_same_attempt(
    tmp_path: Path, claude_bin: Path, stub: StubModel
) -> None:
    project = project_with_resume(tmp_path, claude_bin, stub)
    [first] = project.attempts("t1")
    sessions = list((project.home / ".claude").rglob(f"{first['session_id']}.jsonl"))
    assert sessions
    for session in sessions:
        session.unlink()  # cleaned away, or another machine's
    seen = len(stub.posts("/v1/messages"))
    stub.script = Script(file_name="NOTE.md", content="two\n", final=PASS)
    assert "work attempt 2 passed" in project.tick()
    attempts = project.attempts("t1")
    assert [(a["number"], a["outcome"]) for a in attempts] == [(1, "failed"), (2, "passed")]
    opening = first_requests(stub, seen)[0]
    # A fresh conversation: nothing the model said before.
    assert not [m for m in opening["messages"] if m.get("role") == "assistant"]
    assert "Not yet." not in str(opening["messages"])
    note = (project.dir / "state" / "t1" / "work-002" / "resume.txt").read_text()
    assert first["session_id"] in note and "gone" in note
