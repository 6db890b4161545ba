"""Verdicts that wait, through real ticks: a verifier that says pending
holds the task (the backoff keeps every tick off it), spends no attempt,
reruns the verifier alone, and its reasons reach the next worker."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from e2e.e2e_support import attempts, execute, outcomes, stage
from support import Project, check_invariants, cli_json

# Prints the verdict the test wrote into the file named by argv[1].
SAY = "import sys; print(open(sys.argv[1]).read())"
WORKER = 'echo "$ORCHESTRATOR_NEXT_HINT" >> ../worker.log'


def _project(project: Project, **keys: object) -> Path:
    verdict = project.dir / "verdict.json"
    stages = stage(
        "ci",
        worker=["sh", "-c", WORKER],
        verifier=[sys.executable, "-c", SAY, str(verdict)],
        max_attempts=2,
        **keys,
    )
    project.write_config(stages)
    assert project.run("add", "t1", "--title", "T").returncode == 0
    return verdict


def _due(project: Project) -> None:
    """Time passing: the recheck is due now (no test waits real minutes)."""
    execute(project, "UPDATE tasks SET backoff_until = NULL")


def _tick(project: Project) -> None:
    """One attempt (a failed one would otherwise be retried in the same tick)."""
    done = project.run("tick", "--max-tasks", "1")
    assert done.returncode == 0, done.stderr


def test_pending_holds_the_task_without_spending_attempts(project: Project) -> None:
    verdict = _project(project)
    pending = {"pending": True, "reasons": ["check build: pending"], "recheck_seconds": 600}
    verdict.write_text(json.dumps(pending))
    for _ in range(4):  # twice max_attempts: none of them is spent
        _tick(project)
        assert project.state("t1") == "ci"
        idle = project.run("tick")  # the recheck is not due: no tick claims it
        assert idle.returncode == 0 and len(outcomes(project, "t1")) == _ + 1
        _due(project)
    assert outcomes(project, "t1") == ["pending"] * 4
    assert project.query("SELECT pass, score FROM attempts") == [(None, None)] * 4
    worker_log = (project.dir / "tasks" / "worker.log").read_text().splitlines()
    assert len(worker_log) == 1  # the rechecks ran the verifier alone
    verdict.write_text(json.dumps({"pass": True, "score": 1.0}))
    _tick(project)
    assert project.state("t1") == "complete"
    assert outcomes(project, "t1") == ["pending"] * 4 + ["passed"]
    assert check_invariants(project.db_url) == []


def test_explain_names_the_wait_and_the_recheck(project: Project) -> None:
    # An hour's recheck: however slow the machine, it is still ahead when read.
    verdict = _project(project, pending_timeout=7200)
    verdict.write_text(
        json.dumps({"pending": True, "reasons": ["ci running"], "recheck_seconds": 3600})
    )
    _tick(project)
    data = cli_json(project.cli("explain", "t1", "--json"))
    assert data["backoff"] is None
    pending = data["pending"]
    assert pending["timeout"] == 7200 and pending["reasons"] == ["ci running"]
    assert 0 < pending["seconds_left"] <= 3600
    assert data["attempts"]["used"] == 0
    assert "waits on a pending verdict" in data["next_tick"]
    assert pending["recheck_at"] in data["next_tick"]
    text = project.cli("explain", "t1").stdout
    assert "pending   since" in text and "pending_timeout 7200s" in text


def test_a_failing_check_reaches_the_next_workers_hint(project: Project) -> None:
    verdict = _project(project)
    verdict.write_text(json.dumps({"pending": True, "reasons": ["check lint: pending"]}))
    _tick(project)
    _due(project)
    fail = {"pass": False, "score": 0.2, "reasons": ["check lint: fail"], "next_hint": "fix: lint"}
    verdict.write_text(json.dumps(fail))
    _tick(project)  # the recheck: the verifier alone, which fails
    verdict.write_text(json.dumps({"pass": True, "score": 1.0}))
    _tick(project)  # a real attempt: the worker runs with the failing check's hint
    assert outcomes(project, "t1") == ["pending", "failed", "passed"]
    hints = [a["hint"] for a in attempts(project, "t1")]
    assert hints[1] == "check lint: pending" and hints[2] == "fix: lint"
    log = (project.dir / "tasks" / "worker.log").read_text().splitlines()
    assert log == ["", "fix: lint"]


def test_past_pending_timeout_the_wait_counts_as_a_failure(project: Project) -> None:
    verdict = _project(project, pending_timeout=0)
    verdict.write_text(json.dumps({"pending": True, "reasons": ["check e2e: pending"]}))
    _tick(project)
    _due(project)
    _tick(project)  # the second pending: the run of pendings began before "now + 0"
    rows = attempts(project, "t1")
    assert [r["outcome"] for r in rows] == ["pending", "failed"]
    assert "still pending after" in (rows[1]["next_hint"] or rows[1]["error"] or "")
    assert "check e2e: pending" in project.query("SELECT next_hint FROM tasks")[0][0]
    data = cli_json(project.cli("explain", "t1", "--json"))
    assert data["attempts"]["used"] == 1 and data["pending"] is None
    assert check_invariants(project.db_url) == []


def test_a_pending_verdict_with_several_verifier_samples_still_waits(project: Project) -> None:
    """`verifier_samples` asks the verifier three times; three pending
    answers are a wait, not the median of three zero scores (a failure
    that spends an attempt and, at `max_attempts`, halts the task)."""
    verdict = _project(project, verifier_samples=3)
    verdict.write_text(json.dumps({"pending": True, "reasons": ["ci running"]}))
    for _ in range(3):  # more than max_attempts
        _tick(project)
        _due(project)
    assert outcomes(project, "t1") == ["pending"] * 3
    assert project.state("t1") == "ci"
    assert check_invariants(project.db_url) == []
