"""`SafeGit.beside`: the main working tree's git, made from a worktree's,
reuses the worktree's config scan only when both read the very same config.

Each case plants a smudge filter that the worktree's view of the config
does not name but the main repository's does, then checks out a changed
file in the main working tree through `beside`: the filter must not run.
A control with plain git shows the plant was live.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from orchestrator.workspace import gitrun
from orchestrator.workspace.gitrun import SafeGit

GIT = ("git", "-c", "user.name=t", "-c", "user.email=t@example.invalid")
CLEAN_ENV = {"PATH": os.environ.get("PATH", os.defpath), "HOME": os.devnull}


def _git(where: Path, *args: str) -> str:
    done = subprocess.run(
        [*GIT, "-C", str(where), *args],
        check=True,
        capture_output=True,
        text=True,
        env={**CLEAN_ENV, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull},
    )
    return done.stdout.strip()


class Repo:
    """`repo` on main at commit `one`; `two` changes `plan.txt`; the
    worktree `tasks/t` on task/t; a smudge filter script that leaves a
    marker behind when anything runs it."""

    def __init__(self, root: Path) -> None:
        self.repo = root / "repo"
        self.repo.mkdir()
        _git(self.repo, "init", "-q", "-b", "main")
        (self.repo / "plan.txt").write_text("one\n")
        _git(self.repo, "add", "plan.txt")
        _git(self.repo, "commit", "-qm", "one")
        self.one = _git(self.repo, "rev-parse", "HEAD")
        _git(self.repo, "checkout", "-q", "-b", "two")
        (self.repo / "plan.txt").write_text("two\n")
        _git(self.repo, "commit", "-qam", "two")
        self.two = _git(self.repo, "rev-parse", "HEAD")
        _git(self.repo, "checkout", "-q", "main")
        self.worktree = root / "tasks" / "t"
        _git(self.repo, "worktree", "add", "-q", "-b", "task/t", str(self.worktree), "main")
        self.admin = self.repo / ".git" / "worktrees" / "t"
        self.marker = root / "smudged"
        self.script = root / "smudge.sh"
        self.script.write_text(f"#!/bin/sh\ntouch '{self.marker}'\ncat\n")
        self.script.chmod(0o755)
        info = self.repo / ".git" / "info"
        info.mkdir(exist_ok=True)
        (info / "attributes").write_text("plan.txt filter=evil\n")

    def worktree_git(self) -> SafeGit:
        return SafeGit(self.worktree, git_dir=self.admin)

    def check_out_two_in_main(self, git: SafeGit) -> None:
        done = git.run("read-tree", "-m", "-u", self.one, self.two)
        assert done.ok, done.error
        assert (self.repo / "plan.txt").read_text() == "two\n"

    def control(self) -> None:
        """Plain git checks out the same change and runs the filter."""
        _git(self.repo, "checkout", "-q", "--force", self.one, "--", "plan.txt")
        (self.repo / "plan.txt").unlink()
        _git(self.repo, "checkout", "-q", self.two, "--", "plan.txt")
        assert self.marker.exists(), "the planted filter never ran: the test proves nothing"


@pytest.fixture
def planted(tmp_path: Path) -> Repo:
    return Repo(tmp_path)


def test_an_include_only_the_main_repository_matches_is_scanned_for_it(planted: Repo) -> None:
    # `includeIf "gitdir:<repo>/.git"` names the filter for the main working
    # tree alone: the worktree's scan never sees it.
    evil = planted.repo / ".git" / "evil.config"
    evil.write_text(f'[filter "evil"]\n\tsmudge = {planted.script}\n')
    real = os.path.realpath(planted.repo / ".git")
    _git(planted.repo, "config", f"includeIf.gitdir:{real}.path", str(evil))

    main = planted.worktree_git().beside(planted.repo)
    planted.check_out_two_in_main(main)

    assert not planted.marker.exists(), "the main tree's own filter ran"
    planted.control()


def test_a_worktree_whose_commondir_was_rewritten_shares_no_scan(planted: Repo) -> None:
    # The worker points its worktree's `commondir` at a clean repository:
    # the worktree's git reads that one's config, not the main one's.
    clean = planted.repo.parent / "clean"
    _git(planted.repo.parent, "init", "-q", str(clean))
    (planted.admin / "commondir").write_text(f"{clean / '.git'}\n")
    _git(planted.repo, "config", "filter.evil.smudge", str(planted.script))

    main = planted.worktree_git().beside(planted.repo)
    planted.check_out_two_in_main(main)

    assert not planted.marker.exists(), "the main tree's own filter ran"
    (planted.admin / "commondir").write_text("../..\n")
    planted.control()


def test_a_config_every_tree_reads_alike_is_scanned_once(
    planted: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    _git(planted.repo, "config", "filter.evil.smudge", str(planted.script))
    scans: list[Path] = []
    scan = SafeGit._filter_drivers

    def counted(self: SafeGit) -> gitrun._Scan | None:
        scans.append(self.git_dir)
        return scan(self)

    monkeypatch.setattr(SafeGit, "_filter_drivers", counted)
    main = planted.worktree_git().beside(planted.repo)
    planted.check_out_two_in_main(main)

    assert scans == [planted.admin]
    assert not planted.marker.exists(), "the shared scan lost the filter"
    planted.control()


def _clean_common_dir(planted: Repo, where: Path) -> None:
    """A git folder at `where` sharing the repository's objects and refs
    (links), with a copy of its config made before the filter is planted:
    a worktree whose `commondir` leads there reads no filter."""
    common = planted.repo / ".git"
    where.mkdir(parents=True)
    for name in ("objects", "refs", "logs", "info", "hooks", "worktrees", "HEAD"):
        os.symlink(common / name, where / name)
    (where / "config").write_text((common / "config").read_text())


@pytest.mark.parametrize(
    "record",
    ["../.. ", " ../..\n", "../.." + "/" * 5000 + "x\n"],
    ids=["a trailing space", "a leading space", "longer than a path"],
)
def test_a_commondir_git_reads_otherwise_than_its_plain_path_shares_no_scan(
    planted: Repo, tmp_path: Path, record: str
) -> None:
    # Git trims only the line end and reads the record whole: each of these
    # leads git to a folder the worker made, not to the repository's.
    # Where git goes: from admin (repo/.git/worktrees/t), "../.. " is
    # worktrees/".. ", and "../..///…/x" is repo/.git/x.
    if record.startswith(" "):
        fake = tmp_path / "fake"
        _clean_common_dir(planted, fake)
        (fake / "sub").mkdir()
        os.symlink(fake / "sub", planted.admin / " ..")  # admin/" ../.." is fake
    elif record.endswith(" "):
        _clean_common_dir(planted, planted.repo / ".git" / "worktrees" / ".. ")
    else:
        _clean_common_dir(planted, planted.repo / ".git" / "x")
    (planted.admin / "commondir").write_text(record)
    _git(planted.repo, "config", "filter.evil.smudge", str(planted.script))
    work = planted.worktree_git()
    assert work.usable and work._scan is not None
    assert "evil" not in work._scan.filters  # git did read the clean config

    planted.check_out_two_in_main(work.beside(planted.repo))

    assert not planted.marker.exists(), "the main tree's own filter ran"
    (planted.admin / "commondir").write_text("../..\n")
    planted.control()
