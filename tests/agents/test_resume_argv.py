"""How `resume = true` changes a worker's argv per agent, and that the real
Codex CLI's answer to a session it does not have is read as "gone"."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

from orchestrator import runner
from orchestrator.agents.resume import resumed, session_gone
from orchestrator.config.model import StageConfig
from orchestrator.domain.plateau import PlateauPolicy

GONE_ID = "1b2e7d4c-0000-4000-8000-000000000000"


def stage(output: str) -> StageConfig:
    return StageConfig(
        name="s",
        worker=("x",),
        verifier=None,
        gate=False,
        max_attempts=3,
        timeout_seconds=60,
        pass_score=0.0,
        plateau=PlateauPolicy(),
        prompt=None,
        stdin="prompt",
        env=(),
        output=output,  # type: ignore[arg-type]
        resume=True,
    )


def test_each_agent_resumes_its_own_way() -> None:
    claude = ("claude", "-p", "--output-format", "json")
    assert resumed(stage("claude-json"), claude) == (
        "claude", "--resume", "{prev_session}", "-p", "--output-format", "json"
    )  # fmt: skip
    codex = ("codex", "exec", "-s", "workspace-write", "--json", "-")
    assert resumed(stage("codex-jsonl"), codex) == (
        "codex", "exec", "-s", "workspace-write", "--json", "resume", "{prev_session}", "-"
    )  # fmt: skip
    assert resumed(stage("text"), ("aider", "--yes")) is None


def test_the_real_codex_saying_no_such_session_is_gone(codex_bin: Path) -> None:
    home = Path(tempfile.mkdtemp(prefix="orch-codex-", dir="/var/tmp"))
    try:
        argv = resumed(
            stage("codex-jsonl"), (str(codex_bin), "exec", "--skip-git-repo-check", "--json", "-")
        )
        assert argv is not None
        command = [arg.replace("{prev_session}", GONE_ID) for arg in argv]
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "OPENAI_API_KEY": "x"}
        result = runner.run_command(command, cwd=home, env=env, timeout=60, stdin_data=b"hi")
        assert not result.ok
        assert session_gone(stage("codex-jsonl"), result), result.stderr[-500:]
        assert not session_gone(stage("codex-jsonl"), dataclasses.replace(result, stderr="x"))
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_a_session_id_that_reads_as_an_option_is_not_passed_to_the_agent() -> None:
    # The id is whatever the previous attempt's output (or the usage file
    # its commands can write) said: placed after `--resume` or `resume`, a
    # leading dash makes the agent's option parser read it as an option.
    from orchestrator.agents.resume import run_worker

    argv = ("claude", "-p", "--output-format", "json")
    ran: list[tuple[str, ...]] = []
    notes: list[str] = []

    def run(command: tuple[str, ...]) -> runner.ProcessResult:
        ran.append(command)
        return runner.run_command(["true"], cwd=Path("/"), env={}, timeout=10)

    for session in ("--dangerously-skip-permissions", "-p", "a b", "x\ny"):
        ran.clear()
        run_worker(stage("claude-json"), session, argv, run, notes.append)
        assert ran == [argv], session
    assert len(notes) == 4
    ran.clear()
    run_worker(stage("claude-json"), GONE_ID, argv, run, notes.append)
    assert ran == [("claude", "--resume", "{prev_session}", "-p", "--output-format", "json")]
