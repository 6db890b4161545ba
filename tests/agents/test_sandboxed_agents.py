"""The real Claude Code CLI inside bubblewrap (`init --agent claude
--sandbox`) against the scripted model server: it edits a file in the
task's workspace and the stage passes, while the tests' own files (the
CLI's install cache, the project's Python) are mapped read-only the way a
user maps theirs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from stub_model import Script, StubModel
from test_real_agents import RESEARCH, AgentProject, write_codex_config

from orchestrator.features.sandbox.bwrap import bwrap_program

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def _needs_bwrap() -> None:
    if bwrap_program() is None and not os.environ.get("CI"):
        pytest.skip("bubblewrap (bwrap) is not installed")


def sandboxed_claude(tmp_path: Path, claude_bin: Path, stub: StubModel) -> AgentProject:
    project = AgentProject(tmp_path, "claude", claude_bin.parent, stub, sandbox=True)
    (project.home / ".claude").mkdir()
    # A file bound into the sandbox cannot be replaced by a rename there:
    # Claude Code must still keep its state in it.
    (project.home / ".claude.json").write_text("{}\n")
    config = project.dir / "orchestrator.toml"
    text = config.read_text()
    assert 'sandbox = "bwrap"' in text and '"~/.claude"' in text
    # Where the tests installed the CLI and where their Python lives: both
    # may sit in the account's home, which the sandbox hides.
    mapped = [str(claude_bin.parents[2]), os.path.realpath(sys.base_prefix)]
    text = text.replace(
        "sandbox_ro = [", f"sandbox_ro = [{', '.join(map(json.dumps, mapped))}, ", 1
    )
    config.write_text(text)
    return project


def test_claude_code_edits_a_file_inside_the_sandbox(
    tmp_path: Path, claude_bin: Path, stub: StubModel
) -> None:
    project = sandboxed_claude(tmp_path, claude_bin, stub)
    project.run("add", "t1", "--title", "Plan it", "--body", "Write the plan.")
    stub.script = Script(file_name="RESEARCH.md", content=RESEARCH)
    out = project.tick()
    assert "research attempt 1 passed" in out, out
    assert (project.dir / "tasks" / "t1" / "RESEARCH.md").read_text() == RESEARCH
    [attempt] = project.attempts("t1")
    assert attempt["outcome"] == "passed" and attempt["session_id"]
    # Claude Code kept its session in the mapped ~/.claude, outside the sandbox.
    sessions = list((project.home / ".claude").rglob(f"{attempt['session_id']}.jsonl"))
    assert sessions, "the session file is in the real ~/.claude"
    assert (project.home / ".claude.json").read_text() != "{}\n"  # written through the bind


def test_codex_edits_a_file_inside_the_sandbox_without_its_own(
    tmp_path: Path, codex_bin: Path, stub: StubModel
) -> None:
    """Inside ours, Codex runs with its own sandbox off, so even a home under
    /tmp (where its own refuses to make its helpers) works."""
    project = AgentProject(tmp_path, "codex", codex_bin.parent, stub, sandbox=True)
    write_codex_config(project.home, stub)
    config = project.dir / "orchestrator.toml"
    text = config.read_text()
    assert '"-s", "danger-full-access"' in text and '"-s", "workspace-write"' not in text
    mapped = [str(codex_bin.parents[2]), os.path.realpath(sys.base_prefix)]
    text = text.replace(
        "sandbox_ro = [", f"sandbox_ro = [{', '.join(map(json.dumps, mapped))}, ", 1
    )
    config.write_text(text)
    project.run("add", "t1", "--title", "Plan it", "--body", "Write the plan.")
    stub.script = Script(file_name="RESEARCH.md", content=RESEARCH)
    out = project.tick()
    assert "research attempt 1 passed" in out, out
    assert (project.dir / "tasks" / "t1" / "RESEARCH.md").read_text() == RESEARCH
    [attempt] = project.attempts("t1")
    assert attempt["session_id"]
    assert list((project.home / ".codex").rglob(f"*{attempt['session_id']}*"))  # kept outside
