"""A tick on PostgreSQL survives the database's blips (issue 17).

The server ends the tick's session after each statement of an attempt's
life in turn (`ORCHESTRATOR_TEST_DROP_AFTER_STMT=n`: claim, lease renewal,
record, the claim chained into the record), and separately each commit is
made durable and then reported lost (`ORCHESTRATOR_TEST_LOSE_COMMIT=n`),
the case where a retry must find its own effect rather than apply it
twice. Every case: the tick exits 0 having run each task once, no attempt
is `crashed`, no task halts, and every transition is written exactly once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from reliability_report import ProjectFactory
from reliability_support import (
    COUNTER,
    PASS_VERDICT,
    audit_transitions,
    clone_project,
    query,
    run,
    violations,
)
from support import Project

pytestmark = [
    pytest.mark.reliability,
    pytest.mark.parametrize("reliability_backend", [pytest.param("pg", marks=pytest.mark.pg)]),
]

TASKS = ("t1", "t2")
# A worker that outlives one renewal interval (lease / 3 = 1 s), so each
# attempt renews its lease once; the gate stops each task after one attempt.
# The lease is short but not so short that a loaded machine lets it lapse.
STAGES = f"""
[[pipelines.default.stages]]
name = "research"
gate = true
worker = ["sleep", "1.2"]
verifier = {json.dumps(PASS_VERDICT)}
"""
SETTINGS = {"lease_seconds": 3, "reconnect_seconds": 30}


def base_project(new_project: ProjectFactory) -> Project:
    project = new_project(STAGES, name="base", **SETTINGS)
    for slug in TASKS:
        assert project.cli("add", slug, "--title", "blips").exit_code == 0
    return project


def clean_run(project: Project, out: Path) -> tuple[list[str], int]:
    """What a clean tick executes, in order, and how many transactions it
    commits (its renewals vary a little from run to run)."""
    done = subprocess.run(
        [sys.executable, str(COUNTER), str(out), "tick"],
        cwd=project.dir,
        env=project.process_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(out.read_text())
    return list(found["statements"]), len(found["commits"])


def problems_after(
    project: Project, label: str, result: subprocess.CompletedProcess[str]
) -> list[str]:
    """What went wrong in a case; [] when the tick survived it whole."""
    problems: list[str] = []
    if result.returncode == 69:
        # Only the CLI's schema check, before the tick takes anything, is not
        # retried (a tick with nothing in flight: cron's next minute retries).
        if query(project.db_url, "SELECT count(*) FROM attempts") != [(0,)]:
            return [f"{label}: exit 69 after work began: {result.stderr.strip()[-300:]}"]
        result = run(project, "tick")
    if result.returncode != 0 or "Error" in result.stderr:
        return [f"{label}: exit {result.returncode}: {result.stderr.strip()[-400:]}"]
    problems += [f"{label}: {v}" for v in violations(project.db_url)]
    audit = audit_transitions(project.db_url)
    problems += [f"{label}: {v}" for v in audit.lost + audit.duplicated]
    rows = query(
        project.db_url,
        "SELECT t.slug, a.number, a.outcome FROM attempts a JOIN tasks t ON t.id = a.task_id "
        "ORDER BY t.slug, a.number",
    )
    if rows != [(slug, 1, "passed") for slug in TASKS]:
        problems.append(f"{label}: attempts {rows}")
    states = query(project.db_url, "SELECT slug, stage, status FROM tasks ORDER BY slug")
    if states != [(slug, "research", "awaiting_approval") for slug in TASKS]:
        problems.append(f"{label}: tasks {states}")
    claims = query(project.db_url, "SELECT count(*) FROM transitions WHERE event = 'claim'")
    if claims != [(len(TASKS),)]:
        problems.append(f"{label}: {claims[0][0]} claims")
    return problems


@pytest.mark.slow
def test_session_killed_after_each_statement(
    reliability_backend: str, new_project: ProjectFactory, tmp_path: Path
) -> None:
    base = base_project(new_project)
    sql, _ = clean_run(clone_project(base, tmp_path / "count"), tmp_path / "n.json")
    kinds = {
        "claim": any("INSERT INTO attempts" in s for s in sql),
        "renew": any("lease_expires_at" in s and s.startswith("UPDATE attempts") for s in sql),
        "record": any("UPDATE attempts SET" in s and "outcome" in s for s in sql),
    }
    assert all(kinds.values()), kinds
    failures: list[str] = []
    unavailable = 0
    for n in range(1, len(sql) + 1):
        project = clone_project(base, tmp_path / f"n{n}")
        label = f"n={n} ({sql[n - 1][:60]})"
        result = run(project, "tick", env={"ORCHESTRATOR_TEST_DROP_AFTER_STMT": str(n)})
        unavailable += result.returncode == 69
        failures += problems_after(project, label, result)
    print(f"sessions killed after each of {len(sql)} statements: {unavailable} exited 69")
    assert failures == [], "\n".join(failures)
    # Only the CLI's schema check (one SELECT, then its COMMIT) precedes the tick.
    assert unavailable <= 1, unavailable


def test_commit_lost_after_it_committed(
    reliability_backend: str, new_project: ProjectFactory, tmp_path: Path
) -> None:
    """Each commit of a tick in turn is durable but its answer is lost: the
    retry sees its own effect (the claim's token in an open attempt, the
    attempt already closed) and applies nothing twice."""
    base = base_project(new_project)
    _, total = clean_run(clone_project(base, tmp_path / "count"), tmp_path / "n.json")
    failures: list[str] = []
    seen_again = unavailable = 0
    for n in range(1, total + 1):
        project = clone_project(base, tmp_path / f"c{n}")
        result = run(project, "tick", env={"ORCHESTRATOR_TEST_LOSE_COMMIT": str(n)})
        unavailable += result.returncode == 69
        failures += problems_after(project, f"commit {n}", result)
        seen_again += "(recorded before the connection was lost)" in result.stdout
    print(f"{total} commits lost in turn: {seen_again} records found done, {unavailable} exit 69")
    assert failures == [], "\n".join(failures)
    assert seen_again == len(TASKS)  # each record's lost commit was found, not redone
    assert unavailable <= 1, unavailable  # the CLI's schema check, before the tick
