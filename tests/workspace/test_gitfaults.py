"""The stale-lock rule and the write probe (`workspace/gitfaults.py`), on
real files and real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.workspace.gitfaults import clear_stale_lock, unwritable

# A child that holds `argv[1]` open (or sits in it, a folder) until its stdin closes.
HOLD = (
    "import os, sys; p = sys.argv[1]; "
    "fd = os.open(p, os.O_RDONLY) if os.path.isfile(p) else os.chdir(p); "
    "print('ready', flush=True); sys.stdin.read()"
)


def holder(path: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    return child


def release(child: subprocess.Popen[str]) -> None:
    child.communicate("")


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    (tmp_path / "admin").mkdir()
    path = tmp_path / "admin" / "index.lock"
    path.write_bytes(b"")
    return path


def test_a_lock_whose_owner_is_gone_is_removed(lock: Path, tmp_path: Path) -> None:
    assert clear_stale_lock(lock, [tmp_path / "work", lock.parent], time.time() + 1)
    assert not lock.exists()


def test_a_lock_newer_than_the_operation_is_kept(lock: Path, tmp_path: Path) -> None:
    before = os.stat(lock).st_mtime - 1
    assert not clear_stale_lock(lock, [tmp_path / "work", lock.parent], before)
    assert lock.exists()


def test_a_lock_a_process_holds_open_is_kept(lock: Path, tmp_path: Path) -> None:
    child = holder(lock)
    try:
        assert not clear_stale_lock(lock, [tmp_path / "work"], time.time() + 1)
        assert lock.exists()
    finally:
        release(child)
    assert clear_stale_lock(lock, [tmp_path / "work"], time.time() + 1)


def test_a_lock_is_kept_while_a_process_works_in_the_worktree(lock: Path, tmp_path: Path) -> None:
    """A `git commit` waiting on its editor has closed the lock's descriptor
    but still runs in the worktree."""
    inside = tmp_path / "work" / "sub"
    inside.mkdir()
    child = holder(inside)
    try:
        assert not clear_stale_lock(lock, [tmp_path / "work", lock.parent], time.time() + 1)
        assert lock.exists()
    finally:
        release(child)


def test_a_link_or_folder_in_the_lock_s_place_is_never_removed(tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_text("x")
    link = tmp_path / "index.lock"
    link.symlink_to(target)
    assert not clear_stale_lock(link, [tmp_path], time.time() + 1)
    assert link.is_symlink() and target.exists()


def test_a_writable_folder_is_no_fault(tmp_path: Path) -> None:
    assert unwritable([("repository", tmp_path), ("gone", tmp_path / "missing")]) is None
    assert list(tmp_path.iterdir()) == []  # the probe leaves nothing
