"""Faults of git that are the host's, not the task's, through the real CLI on
real repositories (issue #35 item 7).

- A repository whose `.git` is read-only (a read-only bind mount, root
  only): the tick names the fault and exits 77, the attempt counts toward
  nothing (ticks past `max_attempts` halt nothing), and the task goes on
  once the repository is writable again.
- A stale `index.lock` in the task's worktree (its writer gone): removed
  as the documented rule says, so a round's winner is settled onto the
  branch and the next stage works on it.
- A lock a live process holds: the next stage is never started on the
  branch's old tip; it waits as a host fault, charged nothing, and goes on
  once the holder has let go.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e.e2e_support import PASS, stage, wait_for
from support import Project, check_invariants, git, make_repo, write_config

pytestmark = [pytest.mark.reliability]


def cannot(reason: str) -> None:
    """Skip with the reason; CI runs as root and must run these, never skip."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true forbids skipping: {reason}")
    pytest.skip(reason)


def attempts(project: Project) -> list[tuple[str, str, str | None, str | None]]:
    return [
        (slug, stage_name, outcome, error)
        for slug, stage_name, outcome, error in project.query(
            "SELECT t.slug, a.stage, a.outcome, a.error FROM attempts a "
            "JOIN tasks t ON t.id = a.task_id ORDER BY a.id"
        )
    ]


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Error:")]


# -- (a) a read-only repository -------------------------------------------------------------


@pytest.fixture
def read_only() -> Iterator[list[Path]]:
    """The folders `bind_read_only` mounted, unmounted afterwards. Root
    alone may bind; chmod does not stop root's writes, a mount does."""
    if os.geteuid() != 0:
        cannot("a read-only bind mount needs root")
    if shutil.which("mount") is None:
        cannot("no mount(8)")
    mounted: list[Path] = []
    yield mounted
    for folder in reversed(mounted):
        subprocess.run(["umount", "-l", str(folder)], check=False)


def bind_read_only(mounted: list[Path], folder: Path) -> None:
    done = subprocess.run(
        ["mount", "--bind", str(folder), str(folder)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        cannot(f"cannot bind-mount: {done.stderr.strip()}")
    mounted.append(folder)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)
    assert not os.access(folder, os.W_OK)  # access(2) says EROFS even to root


RO_FAULTY_TICKS = 3  # past max_attempts: a charged attempt would halt the task


def test_a_read_only_repository_is_a_host_fault_that_spends_nothing(
    project: Project, read_only: list[Path]
) -> None:
    mounted = read_only
    repo = make_repo(project.dir)
    stages = stage(
        "implement",
        worker=["sh", "-c", "echo done > done.txt"],
        verifier=PASS,
        max_attempts=2,
        gate=True,
    )
    write_config(project.config, '[pipelines.default]\nrepository = "repo"\n\n' + stages)
    for slug in ("t1", "t2"):
        assert project.run("add", slug, "--title", slug).returncode == 0
    dot_git = repo / ".git"
    bind_read_only(mounted, dot_git)
    for n in range(1, RO_FAULTY_TICKS + 1):
        done = project.run("tick")
        assert done.returncode == 77, (done.returncode, done.stderr[-3000:])
        assert "Traceback" not in done.stderr, done.stderr
        lines = error_lines(done.stderr)
        assert len(lines) == 1, done.stderr
        assert str(dot_git) in lines[0] and "Read-only file system" in lines[0], lines
        rows = attempts(project)
        assert len(rows) == n, rows  # stopped claiming: t2 was never claimed
        assert {outcome for _, _, outcome, _ in rows} == {"host_error"}, rows
        assert project.state("t1") == "implement", project.state("t1")
        assert project.state("t2") == "implement"
    subprocess.run(["mount", "-o", "remount,bind,rw", str(dot_git)], check=True)
    done = project.run("tick")
    assert done.returncode == 0, done.stderr[-3000:]
    assert project.state("t1") == "implement:awaiting_approval"
    assert project.state("t2") == "implement:awaiting_approval"
    for slug in ("t1", "t2"):
        assert git(repo, "show", f"task/{slug}:done.txt").strip() == "done"
    assert check_invariants(project.db_url) == []


# -- (b) a lock in the task's worktree when its round's winner is settled -------------------

# Each candidate writes its slot in answer.txt; a candidate 2 scores best.
CANDIDATE = (
    'echo "$ORCHESTRATOR_CANDIDATE" > answer.txt; {extra}'
    ': > "{signals}/started-$ORCHESTRATOR_CANDIDATE"; '
    'n=0; while [ ! -e "{signals}/go-$ORCHESTRATOR_CANDIDATE" ] && [ $n -lt 15000 ]; '
    "do sleep 0.02; n=$((n+1)); done"
)
JUDGE = (
    "import json, pathlib; c = pathlib.Path('answer.txt').read_text().strip(); "
    "s = 0.9 if c == '2' else 0.6; print(json.dumps({'pass': True, 'score': s}))"
)
# The next stage passes only on the winner's work.
REVIEW = (
    "import json, pathlib; p = pathlib.Path('answer.txt'); "
    "ok = p.exists() and p.read_text().strip() == '2'; "
    "print(json.dumps({'pass': ok, 'score': 1.0 if ok else 0.0}))"
)


def round_project(project: Project, signals: Path, extra: str = "") -> Path:
    repo = make_repo(project.dir)
    signals.mkdir()
    worker = CANDIDATE.replace("{signals}", str(signals)).replace("{extra}", extra)
    stages = stage(
        "implement",
        worker=["sh", "-c", worker],
        verifier=[sys.executable, "-c", JUDGE],
        candidates=2,
    )
    stages += stage(
        "review",
        worker=["true"],
        verifier=[sys.executable, "-c", REVIEW],
        max_attempts=2,
        gate=True,
    )
    write_config(
        project.config,
        '[pipelines.default]\nrepository = "repo"\n\n' + stages,
        retry_interval=0,
    )
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    return repo


def run_round(project: Project, signals: Path) -> subprocess.CompletedProcess[str]:
    """One `tick --jobs 2`: both candidates start, then both are let go."""
    tick = project.popen("tick", "--jobs", "2")
    try:
        wait_for(
            lambda: all((signals / f"started-{c}").exists() for c in (1, 2)),
            timeout=240,
            what="both candidates started",
        )
        for c in (1, 2):
            (signals / f"go-{c}").touch()
        out, err = tick.communicate(timeout=600)
    finally:
        if tick.poll() is None:
            tick.kill()
            tick.communicate()
    return subprocess.CompletedProcess(tick.args, tick.returncode, out, err)


def winner_commit(project: Project) -> str:
    rows = project.query(
        "SELECT commit_sha FROM attempts WHERE stage = 'implement' AND commit_sha IS NOT NULL"
    )
    assert len(rows) == 1, rows
    return str(rows[0][0])


def holds(repo: Path, branch: str, sha: str) -> bool:
    done = subprocess.run(
        ["git", "-C", str(repo), "merge-base", "--is-ancestor", sha, branch], check=False
    )
    return done.returncode == 0


def test_a_stale_index_lock_is_removed_and_the_winner_settled_before_the_next_stage(
    project: Project, tmp_path: Path
) -> None:
    """The issue's reproduction: a lock no process holds (its writer, here
    the candidate, is gone) in the task's worktree when the round's winner
    is to become the branch's tip. It is removed (said on stderr, naming
    it), the winner settled, and the next stage works on the winner's work."""
    signals = tmp_path / "signals"
    lock_holder = project.dir / "repo" / ".git" / "worktrees" / "fix" / "index.lock"
    repo = round_project(project, signals, extra=f': > "{lock_holder}"; ')
    done = run_round(project, signals)
    for _ in range(3):  # the next stage, if this tick did not get to it
        if project.state("fix") != "review":
            break
        done = project.run("tick")
    assert done.returncode == 0, done.stderr[-3000:]
    assert project.state("fix") == "review:awaiting_approval", (
        project.state("fix"),
        attempts(project),
    )
    winner = winner_commit(project)
    assert holds(repo, "task/fix", winner)
    assert not lock_holder.exists()
    review = [(o, e) for _, s, o, e in attempts(project) if s == "review"]
    assert review == [("passed", None)], review
    assert (project.dir / "tasks" / "fix" / "answer.txt").read_text() == "2\n"
    assert check_invariants(project.db_url, allow_running=False) == []


def test_the_next_stage_waits_while_a_live_process_holds_the_lock(
    project: Project, tmp_path: Path
) -> None:
    """A lock a live process holds open is never removed: the winner cannot
    be settled, so the next stage's attempt ends `host_error` before any of
    its commands runs (no verifier judges the old tip), the tick stops
    claiming and exits 74 naming the branch; once the holder is gone, the
    next tick settles the winner and the stage passes on it."""
    signals = tmp_path / "signals"
    repo = round_project(project, signals)
    lock = repo / ".git" / "worktrees" / "fix" / "index.lock"
    base = git(repo, "rev-parse", "main").strip()
    tick = project.popen("tick", "--jobs", "2")
    holder: int | None = None
    try:
        wait_for(
            lambda: all((signals / f"started-{c}").exists() for c in (1, 2)),
            timeout=240,
            what="both candidates started",
        )
        holder = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        for c in (1, 2):
            (signals / f"go-{c}").touch()
        _out, err = tick.communicate(timeout=600)
    finally:
        if tick.poll() is None:
            tick.kill()
            tick.communicate()
    try:
        assert tick.returncode == 74, (tick.returncode, err[-3000:])
        assert "Traceback" not in err, err
        # The settle after the round's record warns; the next stage's host
        # fault names the branch and what it waits for.
        lines = error_lines(err)
        assert any("branch task/fix does not hold" in line for line in lines), err
        review = [(o, e) for _, s, o, e in attempts(project) if s == "review"]
        assert [o for o, _ in review] == ["host_error"], review
        assert project.state("fix") == "review", project.state("fix")
        assert git(repo, "rev-parse", "task/fix").strip() == base  # not settled
        state = project.dir / "state" / "fix"
        assert not list(state.glob("review-*/verifier.out")), list(state.glob("review-*/*"))
        assert lock.exists()  # a held lock is never removed
    finally:
        os.close(holder)
    done = project.run("tick")
    assert done.returncode == 0, done.stderr[-3000:]
    assert project.state("fix") == "review:awaiting_approval", attempts(project)
    assert holds(repo, "task/fix", winner_commit(project))
    review = [o for _, s, o, _ in attempts(project) if s == "review"]
    assert review == ["host_error", "passed"], review
    assert check_invariants(project.db_url, allow_running=False) == []


def test_a_stale_index_lock_in_the_worktree_does_not_fail_the_stage_commit(
    project: Project,
) -> None:
    """A git the worker ran died and left its worktree's `index.lock` (the
    worker is gone, so is its git): the stage commit removes it, as git's
    advice says, notes it on the attempt, and commits; not `worker_error`
    until the task halts."""
    repo = make_repo(project.dir)
    leave = 'echo done > done.txt; : > "$(git rev-parse --git-dir)/index.lock"'
    stages = stage("implement", worker=["sh", "-c", leave], verifier=PASS, gate=True)
    write_config(project.config, '[pipelines.default]\nrepository = "repo"\n\n' + stages)
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    done = project.run("tick")
    assert done.returncode == 0, done.stderr[-3000:]
    assert project.state("fix") == "implement:awaiting_approval", attempts(project)
    [(_, _, outcome, error)] = attempts(project)
    assert outcome == "passed"
    assert error is not None and "index.lock: no process held it" in error, error
    assert git(repo, "show", "task/fix:done.txt").strip() == "done"
    assert not (repo / ".git" / "worktrees" / "fix" / "index.lock").exists()
