"""Attempt snapshots and restores on real git repositories: the worker's
index and HEAD untouched, links kept as links (never followed), huge files
left out, a ref that is not the attempt's refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import git, make_repo

from orchestrator.workspace import attempt_refs
from orchestrator.workspace.attempt_refs import (
    attempt_ref,
    before_restore_ref,
    read_snapshot,
    restore,
    snapshot,
)
from orchestrator.workspace.gitrun import GitError
from orchestrator.workspace.worktree import Identity, Worktree

IDENTITY = Identity("orchestrator", "orchestrator@localhost")
KEY = "t1/build/7/0123456789abcdef"


@pytest.fixture
def wt(tmp_path: Path) -> Worktree:
    repo = make_repo(tmp_path)
    base = git(repo, "rev-parse", "HEAD").strip()
    tree = Worktree(repo, tmp_path / "ws" / "t1", "task/t1", base)
    tree.ensure()
    return tree


def test_a_snapshot_keeps_the_work_and_touches_neither_index_nor_head(wt: Worktree) -> None:
    ws = wt.workspace
    (ws / "keep.txt").write_text("changed\n")
    (ws / "new.txt").write_text("new\n")
    (ws / "gone.txt").unlink()
    (ws / "debug.log").write_text("ignored\n")
    git(ws, "add", "new.txt")  # the worker staged one file itself
    head = git(ws, "rev-parse", "HEAD").strip()
    status = git(ws, "status", "--porcelain")
    ref = attempt_ref("t1", "build", 1)
    kept = snapshot(wt, ref, KEY, "t1: build attempt 1 (kept)", IDENTITY)
    assert git(ws, "rev-parse", "HEAD").strip() == head
    assert git(ws, "status", "--porcelain") == status  # the worker's index as it was
    assert git(ws, "rev-parse", f"{ref}^").strip() == head
    files = sorted(git(wt.repository, "ls-tree", "--name-only", ref).split())
    assert files == [".gitignore", "keep.txt", "new.txt"]
    assert git(wt.repository, "show", f"{ref}:keep.txt") == "changed\n"
    assert read_snapshot(wt, ref, KEY) == kept.sha
    assert read_snapshot(wt, ref, KEY.replace("7", "8")) is None  # another attempt's key
    assert read_snapshot(wt, attempt_ref("t1", "build", 2), KEY) is None  # no such ref


def test_a_link_out_of_the_worktree_is_kept_as_a_link(wt: Worktree, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key.txt").write_text("do not take me\n")
    (wt.workspace / "escape").symlink_to(secret)
    (wt.workspace / "file-link").symlink_to(secret / "key.txt")
    ref = attempt_ref("t1", "build", 1)
    snapshot(wt, ref, KEY, "kept", IDENTITY)
    listing = git(wt.repository, "ls-tree", "-r", ref)
    modes = {line.split("\t")[1]: line.split()[0] for line in listing.splitlines()}
    assert modes["escape"] == "120000" and modes["file-link"] == "120000"
    assert not any(name.startswith("escape/") for name in modes)
    assert git(wt.repository, "cat-file", "-p", f"{ref}:file-link") == str(secret / "key.txt")
    everything = git(wt.repository, "log", "-p", "--all", "--format=")
    assert "do not take me" not in everything


def test_a_huge_file_is_left_out_and_named(wt: Worktree, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attempt_refs, "FILE_LIMIT", 1000)
    with open(wt.workspace / "huge.bin", "wb") as out:
        out.truncate(10_000)  # sparse: big to stat, cheap to make
    (wt.workspace / "small.txt").write_text("small\n")
    ref = attempt_ref("t1", "build", 1)
    kept = snapshot(wt, ref, KEY, "kept", IDENTITY)
    assert kept.left_out == ("huge.bin",)
    files = git(wt.repository, "ls-tree", "--name-only", ref).split()
    assert "small.txt" in files and "huge.bin" not in files
    assert "left out (over 1000 bytes): huge.bin" in git(wt.repository, "log", "-1", ref)
    assert (wt.workspace / "huge.bin").stat().st_size == 10_000  # the worker's file stays


def test_a_workspace_that_became_a_link_is_refused(wt: Worktree, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    os.rename(wt.workspace, moved)
    wt.workspace.symlink_to(moved)
    with pytest.raises(GitError, match="link"):
        snapshot(wt, attempt_ref("t1", "build", 1), KEY, "kept", IDENTITY)


def test_restore_puts_the_snapshot_back_as_one_commit(wt: Worktree) -> None:
    ws = wt.workspace
    (ws / "first.txt").write_text("attempt 1\n")
    one = snapshot(wt, attempt_ref("t1", "build", 1), KEY, "kept", IDENTITY)
    (ws / "first.txt").unlink()
    (ws / "second.txt").write_text("attempt 2\n")
    (ws / "keep.txt").write_text("attempt 2 changed it\n")
    head = git(ws, "rev-parse", "HEAD").strip()
    new = restore(wt, "t1", one.sha, "t1: build restored to attempt 1\n", IDENTITY)
    assert new is not None and git(ws, "rev-parse", "HEAD").strip() == new
    assert git(ws, "rev-parse", "HEAD^").strip() == head
    assert (ws / "first.txt").read_text() == "attempt 1\n"
    assert not (ws / "second.txt").exists()
    assert (ws / "keep.txt").read_text() == "keep\n"
    assert git(ws, "status", "--porcelain") == ""
    before = before_restore_ref("t1")
    assert git(wt.repository, "show", f"{before}:second.txt") == "attempt 2\n"
    # Again: the branch holds it already, nothing is committed.
    assert restore(wt, "t1", one.sha, "again\n", IDENTITY) is None
    assert git(ws, "rev-parse", "HEAD").strip() == new


def test_restore_refuses_a_worktree_off_its_branch(wt: Worktree) -> None:
    one = snapshot(wt, attempt_ref("t1", "build", 1), KEY, "kept", IDENTITY)
    git(wt.workspace, "checkout", "-q", "--detach")
    with pytest.raises(GitError, match="not on task/t1"):
        restore(wt, "t1", one.sha, "msg\n", IDENTITY)
