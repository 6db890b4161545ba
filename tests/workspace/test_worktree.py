"""Worktrees and stage commits on real git repositories, including the
states a tick killed between two git commands leaves behind."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest
from support import git, make_repo

from orchestrator.workspace import stage_commit
from orchestrator.workspace.gitrun import GitError
from orchestrator.workspace.worktree import (
    Identity,
    Worktree,
    branch_tip,
    current_branch,
    repository_root,
)

IDENTITY = Identity("orchestrator", "orchestrator@localhost")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path)


def tree(repo: Path, tmp_path: Path, slug: str = "t1") -> Worktree:
    base = git(repo, "rev-parse", "HEAD").strip()
    return Worktree(repo, tmp_path / "ws" / slug, f"task/{slug}", base)


def test_the_repository_and_its_branch_are_found(repo: Path) -> None:
    (repo / "sub").mkdir()
    assert repository_root(repo / "sub") == repo
    assert current_branch(repo) == "main"
    assert branch_tip(repo, "main") == git(repo, "rev-parse", "HEAD").strip()
    assert branch_tip(repo, "nope") is None


def test_a_detached_head_names_no_base(repo: Path) -> None:
    git(repo, "checkout", "-q", "--detach")
    with pytest.raises(GitError, match="detached"):
        current_branch(repo)


def test_ensure_makes_the_worktree_once(repo: Path, tmp_path: Path) -> None:
    wt = tree(repo, tmp_path)
    wt.ensure()
    wt.ensure()  # again: nothing to do
    assert (wt.workspace / "keep.txt").read_text() == "keep\n"
    assert git(wt.workspace, "branch", "--show-current").strip() == "task/t1"
    assert wt.exists()


def test_a_branch_left_by_a_killed_add_is_reused_not_reset(repo: Path, tmp_path: Path) -> None:
    wt = tree(repo, tmp_path)
    wt.ensure()
    (wt.workspace / "new.txt").write_text("work\n")
    sha = stage_commit.commit(wt, "stage 1", "t1/implement/1", IDENTITY)
    wt.remove()  # the branch stays
    assert not wt.workspace.exists() and branch_tip(repo, "task/t1") == sha
    wt.ensure()
    assert wt.head() == sha and (wt.workspace / "new.txt").exists()


def test_a_stale_worktree_entry_is_pruned(repo: Path, tmp_path: Path) -> None:
    wt = tree(repo, tmp_path)
    wt.ensure()
    shutil.rmtree(wt.workspace)  # the folder went, git's entry stayed
    wt.ensure()
    assert wt.exists() and (wt.workspace / "keep.txt").exists()


def test_a_half_made_checkout_is_cleared(repo: Path, tmp_path: Path) -> None:
    wt = tree(repo, tmp_path)
    wt.ensure()
    # As a kill during checkout leaves it: the folder and its .git file, no entry.
    admin = wt.admin_dir()
    shutil.rmtree(admin)
    (wt.workspace / "keep.txt").unlink()
    wt.ensure()
    assert wt.exists() and (wt.workspace / "keep.txt").exists()


def test_a_foreign_folder_is_refused_and_kept(repo: Path, tmp_path: Path) -> None:
    wt = tree(repo, tmp_path)
    wt.workspace.mkdir(parents=True)
    (wt.workspace / "mine.txt").write_text("someone's\n")
    with pytest.raises(GitError, match="not this task's worktree"):
        wt.ensure()
    assert (wt.workspace / "mine.txt").read_text() == "someone's\n"


def test_an_empty_folder_is_taken(repo: Path, tmp_path: Path) -> None:
    wt = tree(repo, tmp_path)
    wt.workspace.mkdir(parents=True)
    wt.ensure()
    assert wt.exists()


def test_a_stage_commit_holds_every_change_but_ignored_files(repo: Path, tmp_path: Path) -> None:
    wt = tree(repo, tmp_path)
    wt.ensure()
    (wt.workspace / "keep.txt").write_text("changed\n")
    (wt.workspace / "gone.txt").unlink()
    (wt.workspace / "new.txt").write_text("new\n")
    (wt.workspace / "debug.log").write_text("ignored\n")
    sha = stage_commit.commit(wt, "t1: implement attempt 1", "t1/implement/1", IDENTITY)
    assert sha is not None
    names = git(wt.workspace, "show", "--name-status", "--format=%an <%ae>%n%B", sha)
    assert "orchestrator <orchestrator@localhost>" in names
    assert "Orchestrator-Attempt: t1/implement/1" in names
    assert "M\tkeep.txt" in names and "D\tgone.txt" in names and "A\tnew.txt" in names
    assert "debug.log" not in names
    assert (wt.workspace / "debug.log").exists()


def test_a_commit_is_never_made_twice(repo: Path, tmp_path: Path) -> None:
    wt = tree(repo, tmp_path)
    wt.ensure()
    (wt.workspace / "new.txt").write_text("new\n")
    first = stage_commit.commit(wt, "m", "t1/implement/1", IDENTITY)
    (wt.workspace / "later.txt").write_text("after the kill\n")  # would make a 2nd commit
    assert stage_commit.commit(wt, "m", "t1/implement/1", IDENTITY) == first
    assert git(wt.workspace, "rev-list", "--count", f"{wt.base_commit}..HEAD").strip() == "1"


def test_the_workers_own_commits_stay_under_the_stage_commit(repo: Path, tmp_path: Path) -> None:
    wt = tree(repo, tmp_path)
    wt.ensure()
    (wt.workspace / "new.txt").write_text("new\n")
    git(wt.workspace, "add", "new.txt")
    git(wt.workspace, "commit", "-qm", "the worker's own")
    mine = wt.head()
    stage = stage_commit.commit(wt, "implement passed", "t1/implement/1", IDENTITY)
    assert git(wt.workspace, "rev-parse", f"{stage}^").strip() == mine
    assert git(wt.workspace, "diff", "--name-only", mine, stage) == ""  # empty: all was committed


def test_hooks_and_filters_the_worker_configured_never_run(repo: Path, tmp_path: Path) -> None:
    wt = tree(repo, tmp_path)
    wt.ensure()
    marker = tmp_path / "ran"
    hooks = repo / ".git" / "hooks"
    for hook in ("pre-commit", "commit-msg", "post-commit", "post-checkout"):
        (hooks / hook).write_text(f"#!/bin/sh\necho {hook} >> {marker}\n")
        (hooks / hook).chmod(0o755)
    git(repo, "config", "filter.evil.clean", f"sh -c 'echo clean >> {marker}; cat'")
    git(repo, "config", "core.fsmonitor", f"sh -c 'echo fsmonitor >> {marker}'")
    git(repo, "config", "commit.gpgSign", "true")
    (wt.workspace / ".gitattributes").write_text("*.txt filter=evil\n")
    (wt.workspace / "new.txt").write_text("new\n")
    assert stage_commit.commit(wt, "m", "t1/implement/1", IDENTITY) is not None
    wt.remove()
    wt.ensure()
    assert not marker.exists()


def test_admin_dir_ignores_a_rewritten_dot_git_file(repo: Path, tmp_path: Path) -> None:
    wt = tree(repo, tmp_path)
    wt.ensure()
    real = wt.admin_dir()
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    git(elsewhere, "init", "-q")
    (wt.workspace / ".git").write_text(f"gitdir: {elsewhere / '.git'}\n")
    assert wt.admin_dir() == real


def test_a_fifo_the_worker_puts_at_its_gitdir_record_does_not_hang_a_commit(
    repo: Path, tmp_path: Path
) -> None:
    # The worktree's folder under .git/worktrees is written by the worker's
    # own git, so it is the worker's: a FIFO at its `gitdir` blocks a plain
    # read for ever, in the tick, under the host lock.
    wt = tree(repo, tmp_path)
    wt.ensure()
    record = wt.admin_dir() / "gitdir"
    record.unlink()
    os.mkfifo(record)
    (wt.workspace / "new.txt").write_text("work\n")
    outcome: list[object] = []

    def commit() -> None:
        try:
            outcome.append(stage_commit.commit(wt, "m", "t1/implement/1", IDENTITY))
        except GitError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=commit, daemon=True)
    thread.start()
    thread.join(20)
    hung = thread.is_alive()
    if hung:  # let the blocked open see a writer, and end
        os.close(os.open(record, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(20)
    assert not hung
    [result] = outcome
    assert isinstance(result, GitError)  # no worktree record it can trust


def test_a_trailer_is_matched_by_its_whole_line(repo: Path, tmp_path: Path) -> None:
    wt = tree(repo, tmp_path)
    wt.ensure()
    tenth = stage_commit.commit(wt, "m", "t1/implement/10", IDENTITY)
    (wt.workspace / "new.txt").write_text("new\n")
    first = stage_commit.commit(wt, "m", "t1/implement/1", IDENTITY)  # not the 10th's
    assert first != tenth and git(wt.workspace, "rev-parse", f"{first}^").strip() == tenth


def test_a_worktree_add_killed_before_its_checkout_is_made_again(
    repo: Path, tmp_path: Path
) -> None:
    # What `git worktree add -b` leaves when killed (the SafeGit deadline on
    # a large repository, an OOM kill) after it set HEAD and before its
    # checkout: the branch, the worktree listed on it and still locked
    # "initializing", no index, no files. Used as it is, the stage commit
    # would delete every file of the repository.
    wt = tree(repo, tmp_path)
    wt.workspace.parent.mkdir()
    git(repo, "worktree", "add", "-q", "--no-checkout", "-b", wt.branch, str(wt.workspace))
    (repo / ".git" / "worktrees" / "t1" / "locked").write_text("initializing\n")
    wt.ensure()
    assert (wt.workspace / "keep.txt").read_text() == "keep\n"
    assert git(wt.workspace, "status", "--porcelain") == ""
    assert "locked" not in git(repo, "worktree", "list", "--porcelain")


def test_a_worktree_a_person_locked_is_left_as_it_is(repo: Path, tmp_path: Path) -> None:
    wt = tree(repo, tmp_path)
    wt.ensure()
    (wt.workspace / "mine.txt").write_text("work\n")
    git(repo, "worktree", "lock", "--reason", "on a USB disk", str(wt.workspace))
    wt.ensure()
    assert (wt.workspace / "mine.txt").read_text() == "work\n"


@pytest.mark.parametrize("head", ["detached", "another branch"])
def test_a_stage_commit_off_the_branch_is_refused_and_names_where_head_is(
    repo: Path, tmp_path: Path, head: str
) -> None:
    wt = tree(repo, tmp_path)
    wt.ensure()
    if head == "detached":
        git(wt.workspace, "checkout", "-q", "--detach")
    else:
        git(wt.workspace, "checkout", "-q", "-b", "elsewhere")
    (wt.workspace / "new.txt").write_text("new\n")
    with pytest.raises(GitError) as refused:
        stage_commit.commit(wt, "m", "t1/implement/1", IDENTITY)
    said = "a detached HEAD" if head == "detached" else "branch 'elsewhere'"
    assert f"has {said} checked out, not task/t1" in str(refused.value)
    assert git(repo, "rev-list", "--count", "task/t1").strip() == "1"
