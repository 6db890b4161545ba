"""The SQLite "fault after the N-th operation" loop, on our SQL statements.

For each scenario, a clean run of the command counts its statements (N), then
for n = 1..N+1 a fresh copy of the project runs the command with
`ORCHESTRATOR_TEST_CRASH_AFTER_STMT=n`: it must die with 137 (n <= N) or
finish (n = N+1). Then the invariants hold with open attempts allowed, a
clean recovering command finishes the step, the invariants hold with none
open, every transition committed before the crash is still there, none is
written twice, and the task ends where the clean run put it.

Scenarios: `tick` (add -> tick: claim, run, record a gated pass), `advance`
(an approved gate: advance, claim, run, record `complete`), and `approve`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from reliability_report import SWEEP, ProjectFactory, ReliabilityReport
from reliability_support import (
    COUNTER,
    CRASH_RC,
    clone_project,
    events,
    run,
    transition_log,
    violations,
)
from support import Project

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

# scenario -> (command, state after the clean run, events that must appear once)
SCENARIOS = {
    "tick": (("tick",), "research:awaiting_approval", ("await_approval",)),
    "advance": (("tick",), "complete", ("await_approval", "approve", "advance", "stage_passed")),
    "approve": (("approve", "t1"), "research:approved", ("await_approval", "approve")),
}


def base_project(new_project: ProjectFactory, kind: str) -> Project:
    project = new_project(name="base")
    assert project.cli("add", "t1", "--title", "sweep").exit_code == 0
    if kind in ("advance", "approve"):
        assert project.cli("tick").exit_code == 0
        assert project.state("t1") == "research:awaiting_approval"
    if kind == "advance":
        assert project.cli("approve", "t1").exit_code == 0
    return project


def count_statements(project: Project, command: tuple[str, ...], out: Path) -> int:
    result = subprocess.run(
        [sys.executable, str(COUNTER), str(out), *command],
        cwd=project.dir,
        env=project.process_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return int(json.loads(out.read_text())["count"])


def check_case(
    project: Project, n: int, total: int, kind: str, before: list[tuple[object, ...]]
) -> list[str]:
    """Crash after statement n, recover, and say what went wrong (nothing: [])."""
    command, expected, once = SCENARIOS[kind]
    problems: list[str] = []
    died = run(project, *command, env={"ORCHESTRATOR_TEST_CRASH_AFTER_STMT": str(n)})
    want = CRASH_RC if n <= total else 0
    if died.returncode != want:
        return [f"n={n}: exit {died.returncode}, expected {want}: {died.stderr.strip()[-300:]}"]
    problems += [
        f"n={n} after the crash: {v}" for v in violations(project.db_url, allow_running=True)
    ]
    recovered = run(project, *command)
    if recovered.returncode != 0:
        return [*problems, f"n={n}: recovery exit {recovered.returncode}: {recovered.stderr}"]
    problems += [f"n={n} after recovery: {v}" for v in violations(project.db_url)]
    after = transition_log(project.db_url)
    if after[: len(before)] != before:
        problems.append(f"n={n}: a committed transition was lost or changed")
    state = project.state("t1")
    if state != expected:
        problems.append(f"n={n}: t1 ended {state}, a clean run leaves it {expected}")
    log = events(project.db_url)
    problems += [f"n={n}: {e} written {log.count(e)} times" for e in once if log.count(e) != 1]
    if kind == "approve" and not problems:
        # The approval sticks: the next tick moves the gate on and finishes.
        finish = run(project, "tick")
        if finish.returncode != 0 or project.state("t1") != "complete":
            problems.append(f"n={n}: tick after approve: {project.state('t1')} {finish.stderr}")
    return problems


@pytest.mark.parametrize("kind", sorted(SCENARIOS))
def test_crash_after_every_statement(
    kind: str,
    reliability_backend: str,
    new_project: ProjectFactory,
    report: ReliabilityReport,
    tmp_path: Path,
) -> None:
    base = base_project(new_project, kind)
    command = SCENARIOS[kind][0]
    total = count_statements(clone_project(base, tmp_path / "count"), command, tmp_path / "n.json")
    assert 3 < total < 200, total
    before = transition_log(base.db_url)

    failures: list[str] = []
    passed = 0
    for n in range(1, total + 2):
        folder = tmp_path / f"n{n}"
        problems = check_case(clone_project(base, folder), n, total, kind, before)
        failures += problems
        shutil.rmtree(folder, ignore_errors=True)
        if n <= total:  # n = N+1 (no crash) is a check of the count, not a case
            passed += not problems
            report.count(SWEEP, not problems)
    report.sweep_scenarios[kind] = (passed, total)
    assert failures == [], "\n".join(failures)
