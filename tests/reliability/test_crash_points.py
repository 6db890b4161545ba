"""A real process crashes (`os._exit(137)`) at every named crash point.

The points are found by scanning the package for `fault_point("...")`, so a
point added later is covered (or fails here, saying no scenario reaches it).
Each case: bring a task to where the point is on the path, run the command
with `ORCHESTRATOR_TEST_FAULT=<point>:exit` and see it die there, check the
invariants (open attempts allowed), recover with a clean tick (or a re-run
of `approve`), check again with no attempt left open, then drive the task to
`complete` and check that no transition was written twice: one
`await_approval`, one `approve`, one `advance`, one `stage_passed`; one
claim per attempt and at most one closing transition each.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from e2e.e2e_support import wait_for
from features.landing.github_api import serve
from features.landing.pr_support import crash_and_retry, pushes
from reliability_report import CRASH, ProjectFactory
from reliability_support import (
    CRASH_RC,
    GATED,
    audit_transitions,
    crash_env,
    events,
    fault_points,
    outcomes,
    query,
    run,
    violations,
)
from sqlalchemy import create_engine, text
from support import Project

pytestmark = [pytest.mark.reliability, pytest.mark.lane(CRASH)]

POINTS = fault_points()

# Points whose crash leaves the attempt of the scenario unrecorded: recovery
# closes it as `crashed` and the stage runs again. (A crash inside the claim
# transaction rolls the attempt back: there is nothing to recover.)
ATTEMPT_LOST = {
    "after_spawn_recorded",
    "after_worker",
    "after_verifier",
    "before_record",
    "inside_record_tx",
    "after_stage_commit",  # committed, not recorded: rerun, no second copy
    "before_snapshot_ref",  # the attempt's work kept as a loose commit, no ref yet
    "after_snapshot_ref",  # its ref made, the attempt not recorded: closed crashed
    "after_candidate_commit",  # best of N: the candidate crashed, the other slot runs
}
# Points where the attempt is open but none of its commands was seen
# running (the worker not spawned, or spawned but not yet noted): recovery
# closes it `host_error`, which counts toward nothing (issue 22, item 12).
NEVER_STARTED = {
    "after_claim_commit",
    "after_spawn",
    "after_base_recorded",  # a task is a branch: its worktree half made
    "after_worktree_add",
}
# Points reached after everything of the scenario's attempt is committed.
ATTEMPT_KEPT = {
    "inside_claim_tx",
    "after_record_commit",
    "inside_close_tick_tx",
    "after_halt_unknown",
    "after_approval_commit",  # the reviewer's edit committed, the advance not yet
    # The landing (land = "merge"): the attempt is recorded, the task landing.
    "land_after_rebase",  # rebased, the base not moved: the next tick moves it once
    "land_before_ref_move",  # the move's intent, not moved: the next tick moves it once
    "land_after_ref_move",  # moved, not recorded: the next tick records it, moves nothing
    "after_land_record",
    "after_restore_checkout",  # `restore`: files back, no mark yet
    "after_restore_commit",
    "restore_before_git",  # `restore`: checked, nothing written yet
    "after_round_branch_moved",  # best of N: decided and the tip moved, not cleaned up
    "after_candidate_removed",  # best of N: decided, one candidate worktree gone
}
# `restore` of the gate's attempt over a reviewer's edit: killed between its
# steps, run again, it finishes once.
RESTORE_POINTS = {"after_restore_checkout", "after_restore_commit", "restore_before_git"}
RESTORE = ("restore", "t1", "--attempt", "1", "--stage", "research")


# Workers that live past the tick's 10 ms threshold for noting a child's
# identity, so `after_spawn_recorded` is on the path.
STAGES = GATED.replace('worker = ["true"]', 'worker = ["sleep", "0.1"]')


def scenario(point: str) -> str:
    if POINTS[point] in ("landing.py", "merge.py"):
        return "land"
    if POINTS[point] == "pull_request.py":
        return "pull_request"
    if point == "after_approval_commit":
        return "branch_advance"
    if point in RESTORE_POINTS:
        return "restore"
    if POINTS[point] in ("branches.py", "snapshots.py", "attempt_refs.py"):
        return "branch"
    if POINTS[point] in ("slots.py", "settling.py", "candidate_worktrees.py"):
        return "candidates"
    if POINTS[point] == "actions.py":
        return "approve"
    if POINTS[point] == "migrate.py":
        return "migrate"
    if "unknown" in point:
        return "unknown"
    if "recover" in point:
        return "recover"
    if "advance" in point:
        return "advance"
    return "tick"


def migrated_once(point: str, new_project: ProjectFactory) -> None:
    """`migrate --all` of two tasks at a gate, killed at `point` between
    them: run again, each task moved exactly once."""
    project = new_project(STAGES)
    for slug in ("t1", "t2"):
        assert project.cli("add", slug, "--title", "migrate me").exit_code == 0
    tick(project)
    project.write_config(STAGES.replace('worker = ["sleep", "0.1"]', 'worker = ["sleep", "0.2"]'))
    command = ("migrate", "--all", "--to", "current")
    died = run(project, *command, env=crash_env(point))
    assert died.returncode == CRASH_RC, died.stderr
    assert violations(project.db_url, allow_running=False) == []
    again = run(project, *command)
    assert again.returncode == 0, again.stderr
    for slug in ("t1", "t2"):
        log = events(project.db_url, slug)
        assert log.count("migrate") == 1, (slug, log)
    audit = audit_transitions(project.db_url)
    assert audit.lost == [] and audit.duplicated == []


def tick(project: Project, **env: str) -> None:
    result = run(project, "tick", env=env)
    assert result.returncode == 0, result.stderr


def make_repository(project: Project) -> None:
    """A task is a branch: the pipeline's repository, one commit on main."""
    repo = project.dir / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    env |= {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for argv in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "base"]):
        subprocess.run(["git", "-C", str(repo), *argv], check=True, env=env)


def prepare(project: Project, kind: str) -> None:
    """Bring t1 to where the crash point is on the command's path."""
    if kind in ("branch", "branch_advance", "land", "restore", "candidates"):
        make_repository(project)
    assert project.cli("add", "t1", "--title", "crash me").exit_code == 0
    if kind == "land":
        # The research gate approved: the crashing tick runs implement,
        # whose pass makes t1 `landing`, and lands it.
        tick(project)
        assert project.cli("approve", "t1").exit_code == 0
    if kind == "restore":
        tick(project)
        (project.dir / "tasks" / "t1" / "reviewer.txt").write_text("an edit at the gate\n")
    if kind == "branch_advance":
        # A reviewer edits the worktree at the gate, then approves.
        tick(project)
        (project.dir / "tasks" / "t1" / "reviewer.txt").write_text("fixed at the gate\n")
        shown = json.loads(project.cli("show", "t1", "--json").stdout)
        assert project.cli("approve", "t1", "--expect", shown["approval_hash"]).exit_code == 0
    if kind == "unknown":
        # A task ahead of t1 in a pipeline the config does not have: the
        # claim halts it (unknown_stage) before it takes t1.
        assert project.cli("add", "t0", "--title", "lost", "--priority", "9").exit_code == 0
        engine = create_engine(project.db_url)
        with engine.begin() as conn:
            conn.execute(text("UPDATE tasks SET pipeline = 'gone' WHERE slug = 't0'"))
        engine.dispose()
    if kind == "recover":
        # An orphan for recovery to find: the tick died right after the claim.
        died = run(project, "tick", env=crash_env("after_claim_commit"))
        assert died.returncode == CRASH_RC, died.stderr
    elif kind in ("advance", "approve"):
        tick(project)
        assert project.state("t1") == "research:awaiting_approval"
        if kind == "advance":
            assert project.cli("approve", "t1").exit_code == 0


def drive_to_complete(project: Project) -> None:
    for _ in range(8):
        state = project.state("t1")
        if state == "complete":
            return
        if state == "research:awaiting_approval":
            approved = run(project, "approve", "t1")
            assert approved.returncode == 0, approved.stderr
        else:
            tick(project)
    raise AssertionError(f"t1 did not complete: {project.state('t1')}")


@pytest.mark.parametrize("point", sorted(POINTS))
def test_crash_point_recovers_without_double_transitions(
    point: str, reliability_backend: str, new_project: ProjectFactory, tmp_path: Path
) -> None:
    kind = scenario(point)
    if kind == "pull_request":
        if shutil.which("gh") is None and not os.environ.get("CI"):
            pytest.skip("gh is not installed (.ci/run installs Debian's)")
        # `land = "pr"` alone, in a real process against the real gh and the
        # local look-alike of GitHub's API: killed at the point, run again,
        # one push and one pull request (tests/features/landing/test_pull_request.py).
        with serve(tmp_path / "github") as fake:
            outcome = crash_and_retry(point, tmp_path, fake)
            assert outcome["kind"] == "Landed", outcome
            assert pushes(tmp_path) == 1 and len(fake.created()) == 1
        return
    if kind == "migrate":
        migrated_once(point, new_project)
        return
    stages = STAGES
    if kind in ("branch", "branch_advance", "land", "restore", "candidates"):
        lands = 'land = "merge"\n' if kind == "land" else ""
        stages = (
            '[pipelines.default]\nrepository = "repo"\n'
            + lands
            + "\n"
            + STAGES.replace(
                'worker = ["sleep", "0.1"]', 'worker = ["sh", "-c", "sleep 0.1; date > work.txt"]'
            )
        )
    if kind == "candidates":  # best of N: two candidates at the gated stage
        stages = stages.replace('name = "research"', 'name = "research"\ncandidates = 2', 1)
    project = new_project(stages)
    prepare(project, kind)

    command = ("approve", "t1") if kind == "approve" else ("tick",)
    command = RESTORE if kind == "restore" else command
    died = run(project, *command, env=crash_env(point))
    assert died.returncode == CRASH_RC, (
        f"{point} was not reached by the {kind!r} scenario (rc {died.returncode}); "
        f"teach test_crash_points which scenario reaches it\n{died.stderr}"
    )
    assert violations(project.db_url, allow_running=True) == []

    # Recovery: the next clean command finds the mess and finishes the step.
    again = run(project, *command)
    assert again.returncode == 0, again.stderr
    assert violations(project.db_url, allow_running=False) == []
    if kind == "restore":  # the edit is gone from the worktree, kept on its ref; marked once
        assert not (project.dir / "tasks" / "t1" / "reviewer.txt").exists()
        assert project.query("SELECT count(*) FROM attempts WHERE restored_at IS NOT NULL") == [
            (1,)
        ]
    if kind == "approve":
        assert project.state("t1") == "research:approved"
        assert events(project.db_url).count("approve") == 1
        # A third approve is "already approved": still one approval.
        third = run(project, "approve", "t1")
        assert third.returncode == 0, third.stderr
        assert "already approved" in third.stdout
        assert events(project.db_url).count("approve") == 1

    drive_to_complete(project)
    assert violations(project.db_url, allow_running=False) == []
    log = events(project.db_url)
    for event in ("await_approval", "approve", "advance", "stage_passed"):
        assert log.count(event) == 1, (event, log)
    if kind == "branch_advance":  # the reviewer's edit: one commit, made once
        subjects = subprocess.run(
            ["git", "-C", str(project.dir / "repo"), "log", "--format=%s", "main..task/t1"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        assert subjects.count("t1: research approved, with the reviewer's changes") == 1
    if kind == "land":  # landed once: one ref move, one record, one event
        assert log.count("landed") == 1, log
        moves = subprocess.run(
            ["git", "-C", str(project.dir / "repo"), "reflog", "--format=%gs", "main"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        assert moves.count("orchestrator: land") == 1, moves
    if kind == "candidates":  # the round's winner is on the branch, nothing else is left
        repo = project.dir / "repo"
        winner = query(
            project.db_url,
            "SELECT commit_sha FROM attempts WHERE round = 1 AND commit_sha IS NOT NULL",
        )
        assert len(winner) == 1, winner
        ancestor = subprocess.run(
            ["git", "-C", str(repo), "merge-base", "--is-ancestor", winner[0][0], "task/t1"],
            check=False,
        )
        assert ancestor.returncode == 0
        left = subprocess.run(
            ["git", "-C", str(repo), "for-each-ref", "refs/heads/cand/"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert left == ""
    audit = audit_transitions(project.db_url)
    assert audit.lost == [] and audit.duplicated == []
    crashed = outcomes(project.db_url).count("crashed")
    if kind == "recover" or point in NEVER_STARTED:
        # The recovered attempt never ran a command (the scenario's tick died
        # right after its claim): not charged.
        assert crashed == 0, outcomes(project.db_url)
        assert outcomes(project.db_url).count("host_error") == 1, outcomes(project.db_url)
    elif point in ATTEMPT_LOST:
        assert crashed == 1, outcomes(project.db_url)
    elif point in ATTEMPT_KEPT or kind in ("advance", "approve"):
        assert crashed == 0, outcomes(project.db_url)
    else:
        assert crashed <= 1, outcomes(project.db_url)


# issue 22, item 12: PostgreSQL, kill -9 of `tick --jobs 2`: attempts whose
# worker never started (killed between the claim's commit and the spawn)
# were closed `crashed` and counted toward `max_attempts`.
ONE_TRY = GATED.replace(
    "[[pipelines.default.stages]]", "[[pipelines.default.stages]]\nmax_attempts = 1"
)


def test_an_attempt_whose_commands_never_started_is_not_charged(
    reliability_backend: str, new_project: ProjectFactory
) -> None:
    """One attempt allowed; the tick dies after the claim's commit, before
    the worker: recovery closes the attempt `host_error` and the task runs
    its one real attempt instead of halting at `max_attempts`."""
    project = new_project(ONE_TRY)
    assert project.cli("add", "t1", "--title", "never started").exit_code == 0
    died = run(project, "tick", env=crash_env("after_claim_commit"))
    assert died.returncode == CRASH_RC, died.stderr
    again = run(project, "tick")
    assert again.returncode == 0, again.stderr
    assert outcomes(project.db_url)[0] == "host_error", outcomes(project.db_url)
    assert project.state("t1") == "research:awaiting_approval", outcomes(project.db_url)
    assert violations(project.db_url, allow_running=False) == []


def test_an_attempt_whose_worker_ran_is_still_charged(
    reliability_backend: str, new_project: ProjectFactory
) -> None:
    """The counterpart: the tick dies after its worker ran (and before the
    record): the attempt is `crashed`, and with one attempt allowed the
    task halts at `max_attempts`."""
    project = new_project(ONE_TRY.replace('worker = ["true"]', 'worker = ["sleep", "0.1"]'))
    assert project.cli("add", "t1", "--title", "ran").exit_code == 0
    died = run(project, "tick", env=crash_env("after_worker"))
    assert died.returncode == CRASH_RC, died.stderr
    again = run(project, "tick")
    assert again.returncode == 0, again.stderr
    assert outcomes(project.db_url) == ["crashed"], outcomes(project.db_url)
    assert project.state("t1") == "research:halted"


# issue 22, item 14: a killed tick's `ticks` row kept `exit_code` NULL for
# good (35 of 50 kills).
@pytest.mark.parametrize("point", ["after_claim_commit", "after_record_commit"])
def test_the_next_tick_closes_a_dead_ticks_row(
    point: str, reliability_backend: str, new_project: ProjectFactory
) -> None:
    """Killed with an attempt open, or after recording everything: either
    way the next tick closes the dead one's row (exit 137, finished)."""
    project = new_project()
    assert project.cli("add", "t1", "--title", "killed").exit_code == 0
    died = run(project, "tick", env=crash_env(point))
    assert died.returncode == CRASH_RC, died.stderr
    rows = project.query("SELECT id, exit_code, finished_at FROM ticks ORDER BY id")
    assert [(row[1], row[2]) for row in rows] == [(None, None)], rows
    dead = rows[0][0]
    again = run(project, "tick")
    assert again.returncode == 0, again.stderr
    closed = project.query("SELECT exit_code, finished_at FROM ticks WHERE id = :i", i=dead)
    assert closed[0][0] == 137 and closed[0][1] is not None, closed
    assert project.query("SELECT count(*) FROM ticks WHERE exit_code IS NULL") == [(0,)]


# Best of N: a tick killed (SIGKILL) with 2 of its 4 candidates recorded.
# Each candidate waits for its go file; 3 and 4 never get one.
ROUND_WORKER = (
    'c="$ORCHESTRATOR_CANDIDATE"; case "$c" in 1) s=0.3;; 2) s=0.9;; *) s=0.8;; esac; '
    'echo "$s" > answer.txt; : > "{signals}/started-$c"; '
    'n=0; while [ ! -e "{signals}/go-$c" ] && [ $n -lt 15000 ]; do sleep 0.02; n=$((n+1)); done'
)
ROUND_VERIFIER = (
    "import json, pathlib; s = float(pathlib.Path('answer.txt').read_text()); "
    "print(json.dumps({'pass': s >= 0.5, 'score': s}))"
)


def test_a_killed_round_is_decided_once_from_what_was_recorded(
    reliability_backend: str, new_project: ProjectFactory, tmp_path: Path
) -> None:
    """`tick --jobs 4` is killed once candidates 1 (0.3, failed) and 2 (0.9,
    passed) are recorded and 3 and 4 still run: the next tick kills 3 and
    4, closes them `crashed`, and decides the round once: candidate 2 wins
    (3 and 4 never got a verdict), its commit is the task branch's tip."""
    signals = tmp_path / "signals"
    signals.mkdir()
    worker = ROUND_WORKER.replace("{signals}", str(signals))
    stages = (
        '[pipelines.default]\nrepository = "repo"\n\n[[pipelines.default.stages]]\n'
        'name = "research"\ngate = true\ncandidates = 4\n'
        f"worker = {json.dumps(['sh', '-c', worker])}\n"
        f"verifier = {json.dumps([sys.executable, '-c', ROUND_VERIFIER])}\n"
    )
    project = new_project(stages)
    make_repository(project)
    assert project.cli("add", "t1", "--title", "four at once").exit_code == 0
    tick = project.popen("tick", "--jobs", "4")
    try:
        for slot in (1, 2, 3, 4):
            wait_for(lambda slot=slot: (signals / f"started-{slot}").exists(), timeout=240)
        for slot in (1, 2):
            (signals / f"go-{slot}").touch()
            wait_for(
                lambda slot=slot: (
                    query(
                        project.db_url,
                        "SELECT count(*) FROM attempts WHERE candidate = :c "
                        "AND finished_at IS NOT NULL",
                        c=slot,
                    )[0][0]
                    == 1
                ),
                timeout=240,
            )
        os.kill(tick.pid, signal.SIGKILL)
        tick.communicate(timeout=30)
    finally:
        if tick.poll() is None:
            tick.kill()
            tick.communicate()  # reaped: no process outlives its test
    assert violations(project.db_url, allow_running=True) == []
    assert project.state("t1") == "research:running"

    again = run(project, "tick")
    assert again.returncode == 0, again.stderr
    assert project.state("t1") == "research:awaiting_approval"
    rows = query(
        project.db_url,
        "SELECT candidate, outcome, score, commit_sha, number FROM attempts ORDER BY candidate",
    )
    assert [r[1] for r in rows] == ["failed", "passed", "crashed", "crashed"], rows
    decided = query(
        project.db_url,
        "SELECT a.candidate, t.event FROM transitions t JOIN attempts a ON a.id = t.attempt_id "
        "WHERE t.event <> 'claim'",
    )
    assert decided == [(2, "await_approval")], decided
    repo = project.dir / "repo"
    tip = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "task/t1"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert rows[1][3] == tip
    loser = f"refs/orchestrator/t1/research/{rows[0][4]}"
    assert subprocess.run(["git", "-C", str(repo), "rev-parse", loser], check=False).returncode == 0
    assert violations(project.db_url, allow_running=False) == []
    audit = audit_transitions(project.db_url)
    assert audit.lost == [] and audit.duplicated == []
    # Nothing of the killed tick's candidates still runs.
    left = subprocess.run(
        ["pgrep", "-f", str(signals)], check=False, capture_output=True, text=True
    ).stdout
    assert left.strip() == "", left
