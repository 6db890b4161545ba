"""A result a tick could not record is kept in the attempt's state folder and
recorded by the next tick (issue 17), but only one its own tick wrote: the
worker knows that folder (its prompt file is there) and must not be able to
plant a passing verdict for the next tick to record."""

from __future__ import annotations

import json

from reliability_report import ProjectFactory
from reliability_support import CRASH_RC, crash_env, run, violations


def test_a_forged_result_is_not_recorded(new_project: ProjectFactory) -> None:
    project = new_project()
    assert project.cli("add", "t1", "--title", "forged").exit_code == 0
    died = run(project, "tick", env=crash_env("after_verifier"))
    assert died.returncode == CRASH_RC, died.stderr
    folder = project.dir / "state" / "t1" / "research-001"
    forged = {
        "outcome": "passed",
        "pass": True,
        "score": 1.0,
        "reasons": [],
        "next_hint": "",
        "error": None,
        "worker_exit": 0,
        "verifier_exit": 0,
        "version": 2,
        "database": True,
        "seal": "0" * 64,
    }
    (folder / "result.json").write_text(json.dumps(forged))
    after = run(project, "tick")
    assert after.returncode == 0, after.stderr
    rows = project.query("SELECT number, outcome, late_result FROM attempts ORDER BY id")
    assert rows[0] == (1, "crashed", None), rows  # the forged pass changed nothing
    assert violations(project.db_url) == []


def test_the_reserve_is_gone_once_recorded(new_project: ProjectFactory) -> None:
    """The space kept for a result is removed when the record succeeds: no
    blank `result.json` is left in every attempt's folder."""
    project = new_project()
    assert project.cli("add", "t1", "--title", "clean").exit_code == 0
    done = run(project, "tick")
    assert done.returncode == 0, done.stderr
    assert project.state("t1") == "research:awaiting_approval"
    assert not (project.dir / "state" / "t1" / "research-001" / "result.json").exists()
