"""Best-attempt restore through real ticks and real CLI processes on a real
repository: every attempt's work kept on its hidden ref, `on_halt = "best"`
and `orchestrator restore`."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.e2e_support import stage
from support import Project, check_invariants, git, make_repo, write_config

# Attempt n leaves work.txt saying so, one file only it has, and the score
# the verifier will read back: 0.3, 0.8, 0.5, 0.5, ... (patience 2 halts at 4).
WORKER = (
    'n="$ORCHESTRATOR_ATTEMPT"; rm -f only-*.txt; echo "attempt $n" > work.txt; '
    'echo "$n" > "only-$n.txt"; '
    'case "$n" in 1) s=0.3;; 2) s=0.8;; *) s=0.5;; esac; echo "$s" > score.txt'
)
VERIFIER = ["sh", "-c", 'printf \'{"pass": false, "score": %s}\' "$(cat score.txt)"']


def plateau_project(project: Project, on_halt: str) -> Path:
    repo = make_repo(project.dir)
    stages = stage(
        "implement",
        worker=["sh", "-c", WORKER],
        verifier=VERIFIER,
        max_attempts=10,
        plateau={"patience": 2, "min_delta": 0.01},
        on_halt=on_halt,
    )
    write_config(project.config, '[pipelines.default]\nrepository = "repo"\n\n' + stages)
    return repo


def halted(project: Project) -> Path:
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    done = project.run("tick")
    assert done.returncode == 0, done.stderr
    assert project.state("fix") == "implement:halted"
    assert project.query("SELECT halt_reason FROM tasks") == [("score_plateau",)]
    scores = project.query("SELECT number, score FROM attempts ORDER BY number")
    assert scores == [(1, 0.3), (2, 0.8), (3, 0.5), (4, 0.5)]
    return project.dir / "tasks" / "fix"


def test_on_halt_best_leaves_the_best_attempts_work_on_the_branch(project: Project) -> None:
    repo = plateau_project(project, "best")
    workspace = halted(project)
    # The branch tip holds attempt 2's tree (its score 0.8), not attempt 4's.
    assert git(repo, "show", "task/fix:work.txt") == "attempt 2\n"
    files = git(repo, "ls-tree", "--name-only", "task/fix").split()
    assert "only-2.txt" in files and "only-4.txt" not in files
    assert (workspace / "work.txt").read_text() == "attempt 2\n"
    assert not (workspace / "only-4.txt").exists()
    assert git(workspace, "status", "--porcelain") == ""  # worktree == the new commit
    subject = git(repo, "log", "-1", "--format=%s", "task/fix").strip()
    assert subject == "fix: implement restored to attempt 2"
    marked = project.query("SELECT number FROM attempts WHERE restored_at IS NOT NULL")
    assert marked == [(2,)]
    # Every attempt's work is on its own ref, passed or not.
    for number in (1, 2, 3, 4):
        ref = f"refs/orchestrator/fix/implement/{number}"
        assert git(repo, "show", f"{ref}:work.txt") == f"attempt {number}\n"
    # Another tick does not restore again.
    tip = git(repo, "rev-parse", "task/fix").strip()
    assert project.run("tick").returncode == 0
    assert git(repo, "rev-parse", "task/fix").strip() == tip
    shown = json.loads(project.run("show", "fix", "--json").stdout)
    marks = {a["number"]: (a["best"], a["restored"]) for a in shown["attempts"]}
    assert marks[2] == (True, True) and marks[4] == (False, False)
    assert check_invariants(project.db_url, allow_running=False) == []


def test_on_halt_last_leaves_the_last_attempts_work(project: Project) -> None:
    repo = plateau_project(project, "last")
    workspace = halted(project)
    assert (workspace / "work.txt").read_text() == "attempt 4\n"
    assert git(repo, "rev-list", "--count", "main..task/fix").strip() == "0"
    assert project.query("SELECT count(*) FROM attempts WHERE restored_at IS NOT NULL") == [(0,)]


def test_restore_attempt_1_puts_its_files_back(project: Project) -> None:
    repo = plateau_project(project, "best")
    workspace = halted(project)
    (workspace / "note.txt").write_text("a person's edit\n")  # kept before it is replaced
    done = project.run("restore", "fix", "--attempt", "1")
    assert done.returncode == 0, done.stderr
    assert "attempt 1 restored" in done.stdout
    assert (workspace / "work.txt").read_text() == "attempt 1\n"
    assert (workspace / "only-1.txt").exists() and not (workspace / "only-2.txt").exists()
    assert not (workspace / "note.txt").exists()
    assert git(repo, "show", "refs/orchestrator/fix/_before-restore:note.txt") == (
        "a person's edit\n"
    )
    assert git(repo, "show", "task/fix:work.txt") == "attempt 1\n"
    again = project.run("restore", "fix", "--attempt", "1", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["commit"] is None  # nothing new to commit
    shown = json.loads(project.run("show", "fix", "--json").stdout)
    assert [a["number"] for a in shown["attempts"] if a["restored"]] == [1]
    assert check_invariants(project.db_url, allow_running=False) == []


def test_restore_refuses_bad_input_with_one_line(project: Project) -> None:
    repo = plateau_project(project, "last")
    halted(project)
    cases = [
        (["restore", "../etc", "--attempt", "1"], 1, "slug"),
        (["restore", "nope", "--attempt", "1"], 1, "no task"),
        (["restore", "fix", "--attempt", "9"], 1, "no attempt 9"),
        (["restore", "fix", "--attempt", "1", "--stage", "nosuch"], 1, "no stage"),
        (["restore", "fix", "--attempt", "0"], 2, "attempt"),
        (["restore", "fix", "--attempt", "x"], 2, "attempt"),
    ]
    for argv, status, words in cases:
        done = project.run(*argv)
        assert done.returncode == status, (argv, done.stderr)
        assert words in done.stderr, (argv, done.stderr)
        if status == 1:
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    git(repo, "update-ref", "-d", "refs/orchestrator/fix/implement/3")
    gone = project.run("restore", "fix", "--attempt", "3")
    assert gone.returncode == 1 and "gone" in gone.stderr
    # A ref someone else wrote (not this attempt's sealed key) is not taken.
    git(repo, "update-ref", "refs/orchestrator/fix/implement/3", "main")
    forged = project.run("restore", "fix", "--attempt", "3")
    assert forged.returncode == 1 and "not its" in forged.stderr
    assert project.run("resume", "fix").returncode == 0
    ready = project.run("restore", "fix", "--attempt", "1")
    assert ready.returncode == 1 and "halt it first" in ready.stderr


def test_a_kill_between_the_best_restore_and_its_mark_restores_once(project: Project) -> None:
    repo = plateau_project(project, "best")
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    killed = project.run("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": "after_restore_commit"})
    assert killed.returncode == 137, killed.stderr
    assert project.state("fix") == "implement:halted"  # the halt was committed first
    assert project.query("SELECT count(*) FROM attempts WHERE restored_at IS NOT NULL") == [(0,)]
    assert project.run("tick").returncode == 0
    assert project.query("SELECT number FROM attempts WHERE restored_at IS NOT NULL") == [(2,)]
    subjects = git(repo, "log", "--format=%s", "main..task/fix").splitlines()
    assert subjects == ["fix: implement restored to attempt 2"]
    assert check_invariants(project.db_url, allow_running=False) == []


def test_a_snapshot_whose_attempt_was_never_recorded_is_still_its_own(project: Project) -> None:
    """Killed after the ref, before the record: the attempt is closed
    `crashed`, its ref (sealed with its key) is recognised and restorable;
    the next attempt's number is new, so nothing writes over it."""
    plateau_project(project, "last")
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    killed = project.run("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": "after_snapshot_ref"})
    assert killed.returncode == 137, killed.stderr
    assert project.run("tick").returncode == 0
    rows = project.query("SELECT number, outcome FROM attempts ORDER BY number")
    assert rows[0] == (1, "crashed") and rows[1][0] == 2
    done = project.run("restore", "fix", "--attempt", "1")
    assert done.returncode == 0, done.stderr
    assert (project.dir / "tasks" / "fix" / "work.txt").read_text() == "attempt 1\n"


def test_restore_refuses_a_task_being_landed(project: Project) -> None:
    """A kill mid-landing leaves the task `landing`: the next tick finishes
    the landing of what the last stage passed. A restore in between would
    put another attempt's work (here a failed one's) on the branch the
    landing then moves to main, unverified."""
    repo = make_repo(project.dir)
    worker = ["sh", "-c", 'echo "attempt $ORCHESTRATOR_ATTEMPT" > work.txt']
    verifier = [
        "sh",
        "-c",
        'if grep -q "attempt 2" work.txt; then echo \'{"pass": true, "score": 1}\'; '
        'else echo \'{"pass": false, "score": 0.1}\'; fi',
    ]
    stages = stage("implement", worker=worker, verifier=verifier, max_attempts=3)
    write_config(
        project.config,
        '[pipelines.default]\nrepository = "repo"\nland = "merge"\n\n' + stages,
    )
    assert project.run("add", "a", "--title", "Task a").returncode == 0
    (repo / "other.txt").write_text("other\n")
    git(repo, "add", "other.txt")
    git(repo, "commit", "-qm", "meanwhile")
    killed = project.run("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": "land_after_rebase"})
    assert killed.returncode == 137, killed.stderr
    assert project.query("SELECT status FROM tasks") == [("landing",)]
    done = project.run("restore", "a", "--attempt", "1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "landing" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert project.run("tick").returncode == 0
    assert project.state("a") == "complete"
    assert git(repo, "show", "main:work.txt") == "attempt 2\n"
    assert check_invariants(project.db_url, allow_running=False) == []


def test_a_restore_that_read_the_task_before_a_tick_claimed_it_is_refused(
    project: Project, tmp_path: Path
) -> None:
    """A restore reads the task halted, then a person resumes it and a tick
    claims it (its worker held in the worktree): the restore must not write
    the branch under that attempt. It checks the task again on the row it
    holds for its git step and mark, and refuses: it is running."""
    import os
    import signal

    from e2e.e2e_support import wait_for

    repo = plateau_project(project, "last")
    halted(project)
    before = git(repo, "rev-parse", "task/fix").strip()
    restoring = project.popen(
        "restore",
        "fix",
        "--attempt",
        "2",
        extra_env={"ORCHESTRATOR_TEST_FAULT": "restore_before_git:stop"},
    )
    try:
        stat = Path(f"/proc/{restoring.pid}/stat")
        wait_for(lambda: stat.read_text().rpartition(")")[2].split()[0] == "T", timeout=60)
        started, release = tmp_path / "started", tmp_path / "release"
        held = f'touch "{started}"; while [ ! -e "{release}" ]; do sleep 0.01; done; {WORKER}'
        stages = stage("implement", worker=["sh", "-c", held], verifier=VERIFIER, max_attempts=10)
        # The held worker must reach the task in flight: a compatible edit, upgraded.
        head = '[pipelines.default]\nrepository = "repo"\non_change = "upgrade"\n\n'
        write_config(project.config, head + stages)
        assert project.run("resume", "fix").returncode == 0
        ticking = project.popen("tick", "--max-tasks", "1")
        wait_for(started.exists, timeout=60, what="the claimed attempt's worker")
    finally:
        os.kill(restoring.pid, signal.SIGCONT)
    _, err = restoring.communicate(timeout=60)
    try:
        assert restoring.returncode == 1, err
        assert "running" in err and len(err.strip().splitlines()) == 1, err
        assert git(repo, "rev-parse", "task/fix").strip() == before
        assert project.query("SELECT count(*) FROM attempts WHERE restored_at IS NOT NULL") == [
            (0,)
        ]
    finally:
        release.touch()
        ticking.communicate(timeout=120)
    assert check_invariants(project.db_url, allow_running=False) == []
