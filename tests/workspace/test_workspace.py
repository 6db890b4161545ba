"""The workspace fingerprint behind the no-change guard (issue 15)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.workspace import fingerprint as workspace
from orchestrator.workspace.fingerprint import fingerprint

GIT = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]


def test_a_tree_fingerprint_follows_content_not_writes(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("one")
    first = fingerprint(tmp_path)
    assert first is not None and first.startswith("tree:")
    (tmp_path / "sub" / "a.txt").write_text("one")  # rewritten, same content
    assert fingerprint(tmp_path) == first
    (tmp_path / "sub" / "a.txt").write_text("two")
    second = fingerprint(tmp_path)
    assert second != first
    (tmp_path / "b.txt").write_text("")
    assert fingerprint(tmp_path) not in (first, second)


def test_a_tree_fingerprint_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workspace, "MAX_FILES", 3)
    for index in range(5):
        (tmp_path / f"f{index}").write_text(str(index))
    bounded = fingerprint(tmp_path)
    assert bounded is not None and bounded.endswith(":partial")


def test_a_missing_workspace_has_no_fingerprint(tmp_path: Path) -> None:
    assert fingerprint(tmp_path / "nope") is None


def test_a_git_fingerprint_sees_commits_edits_and_untracked_content(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    empty = fingerprint(tmp_path)
    assert empty is not None and empty.startswith("git:")
    (tmp_path / "new.txt").write_text("a")
    untracked = fingerprint(tmp_path)
    assert untracked != empty
    (tmp_path / "new.txt").write_text("b")  # untracked content counts too
    assert fingerprint(tmp_path) != untracked
    subprocess.run([*GIT, "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*GIT, "commit", "-qm", "one"], cwd=tmp_path, check=True)
    committed = fingerprint(tmp_path)
    (tmp_path / "new.txt").write_text("b")  # same content: no change
    assert fingerprint(tmp_path) == committed
    (tmp_path / "new.txt").write_text("c")
    edited = fingerprint(tmp_path)
    assert edited != committed
    subprocess.run([*GIT, "commit", "-qam", "two"], cwd=tmp_path, check=True)
    assert fingerprint(tmp_path) not in (committed, edited)
