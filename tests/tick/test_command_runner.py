"""The command runner alone: one command of an attempt runs under its fence
guard with its output captured in the state folder and its identity noted
for recovery and the record; the child's environment is filtered once per
pipeline and stage and carries the attempt's own values."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from e2e.e2e_support import PASS, stage
from support import Project
from tick.tick_support import Bench

from orchestrator import runner
from orchestrator.tick.attempt_context import AttemptContext
from orchestrator.tick.fence import FenceGuard
from orchestrator.tick.lookups import attempt_folder


def test_a_command_is_captured_and_its_process_noted(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = bench(stage("only", worker=["true"], verifier=PASS))
    b.add("t1")
    claim = b.claim()
    folder = attempt_folder(b.settings, "t1", "only", 1)
    folder.mkdir(parents=True)
    context = AttemptContext.of(claim, project.dir)
    commands = b.commands()
    env = commands.environment(claim.pipeline, claim.stage, context.environment())
    # Long enough (past 10 ms) to be noted; says its {task} placeholder.
    argv = ("sh", "-c", 'sleep 0.2; echo "ran $0"; echo oops >&2', "{task}")
    result = commands.run(
        "worker", argv, context, project.dir, env, folder, FenceGuard(b.tick, b.tx, claim)
    )
    assert result.ok
    assert (folder / "worker.out").read_text() == "ran t1\n"
    assert (folder / "worker.err").read_text() == "oops\n"
    noted = runner.ProcessIdentity.read_note(folder / "worker.proc")
    assert noted is not None
    assert b.notes.take_process(folder) == noted  # for the attempt's record
    assert b.notes.take_process(folder) is None  # taken once


def test_a_stopped_tick_stops_the_command(bench: Callable[..., Bench], project: Project) -> None:
    b = bench(stage("only", worker=["true"], verifier=PASS))
    b.add("t1")
    claim = b.claim()
    folder = project.dir / "state-folder"
    folder.mkdir()
    b.tick.stop.set()
    result = b.commands().run(
        "worker",
        ("sleep", "30"),
        AttemptContext.of(claim, project.dir),
        project.dir,
        {"PATH": os.environ["PATH"]},
        folder,
        FenceGuard(b.tick, b.tx, claim),
    )
    assert result.interrupted


def test_the_environment_is_filtered_once_per_stage(
    bench: Callable[..., Bench], project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEPLOY_SECRET", "s3cret")
    monkeypatch.setenv("ORCHESTRATOR_DB_URL", "sqlite:///ours.db")
    b = bench(
        stage("only", worker=["true"], verifier=PASS, env={"STAGE_VALUE": "v"}),
        env_deny=["DEPLOY_*"],
    )
    b.add("t1")
    claim = b.claim()
    commands = b.commands()
    env = commands.environment(claim.pipeline, claim.stage, {"ORCHESTRATOR_TASK": "t1"})
    assert "DEPLOY_SECRET" not in env
    assert "ORCHESTRATOR_DB_URL" not in env
    assert (env["STAGE_VALUE"], env["ORCHESTRATOR_TASK"]) == ("v", "t1")
    # The filtered base is the tick's, built once; only our own values change.
    monkeypatch.setenv("LATE_VALUE", "late")
    again = commands.environment(claim.pipeline, claim.stage, {"ORCHESTRATOR_TASK": "t2"})
    assert "LATE_VALUE" not in again
    assert again["ORCHESTRATOR_TASK"] == "t2"
    assert "LATE_VALUE" in b.commands().environment(claim.pipeline, claim.stage, {})


def test_a_state_folder_gone_is_noted_and_is_not_the_hosts_fault(
    bench: Callable[..., Bench], project: Project, tmp_path: Path
) -> None:
    b = bench(stage("only", worker=["true"], verifier=PASS))
    b.add("t1")
    claim = b.claim()
    # Gone (as a worker that moved it away leaves it): neither capture file
    # nor note fits there. The disk is fine, so the tick goes on claiming;
    # a full or read-only disk is the host's fault (tests/reliability).
    gone = tmp_path / "no-such-folder"
    result = b.commands().run(
        "worker",
        ("sh", "-c", "sleep 0.2; echo done"),
        AttemptContext.of(claim, project.dir),
        project.dir,
        {"PATH": os.environ["PATH"]},
        gone,
        FenceGuard(b.tick, b.tx, claim),
    )
    assert result.ok  # the command ran; its output is whole in memory
    assert result.stdout.strip() == "done"
    assert b.tick.report.host_fault is None
    assert b.tick.report.stopped_claiming is None
    note = b.notes.take_capture(gone)
    assert note is not None
    assert "worker output not fully captured" in note
