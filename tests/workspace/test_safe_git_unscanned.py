"""Commands git runs that no config scan sees: a submodule's own config
(reached when the worker turns `submodule.recurse` on) and the signature
programs a `log` runs when the worker turns `log.showSignature` on. Each
case plants the command and runs the orchestrator's git call it would
hijack: the marker must not appear."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from workspace.test_safe_git_beside import Repo, _git

from orchestrator.workspace.gitrun import SafeGit


def test_a_submodules_own_filter_runs_nothing_in_a_checkout(tmp_path: Path) -> None:
    src = tmp_path / "subsrc"
    src.mkdir()
    _git(src, "init", "-q", "-b", "main")
    (src / "f.txt").write_text("1\n")
    _git(src, "add", "f.txt")
    _git(src, "commit", "-qm", "s1")
    (src / "f.txt").write_text("2\n")
    _git(src, "commit", "-qam", "s2")
    s2 = _git(src, "rev-parse", "HEAD")
    _git(src, "checkout", "-q", "HEAD~1")

    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(src), "sub")
    _git(repo, "commit", "-qm", "A")
    one = _git(repo, "rev-parse", "HEAD")
    _git(repo / "sub", "checkout", "-q", s2)
    _git(repo, "add", "sub")
    _git(repo, "commit", "-qm", "B")
    two = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "--recurse-submodules", one)
    assert (repo / "sub" / "f.txt").read_text() == "1\n"

    # The worker's plant: recursion on, and a filter in the submodule's config.
    marker = tmp_path / "smudged"
    script = tmp_path / "smudge.sh"
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\ncat\n")
    script.chmod(0o755)
    modules = repo / ".git" / "modules" / "sub"
    _git(repo, "config", "-f", str(modules / "config"), "filter.evil.smudge", str(script))
    (modules / "info").mkdir(exist_ok=True)
    (modules / "info" / "attributes").write_text("f.txt filter=evil\n")
    _git(repo, "config", "submodule.recurse", "true")

    git = SafeGit(repo)
    assert git.usable and git._scan is not None and git._scan.filters == ()
    done = git.run("read-tree", "-m", "-u", one, two)  # the landing's checkout
    assert done.ok, done.error
    assert not marker.exists(), "the submodule's filter ran in the tick's place"


SIGS = {
    "ssh": ("gpg.ssh.program", "-----BEGIN SSH SIGNATURE-----"),
    "x509": ("gpg.x509.program", "-----BEGIN SIGNED MESSAGE-----"),
}


@pytest.fixture
def planted(tmp_path: Path) -> Repo:
    return Repo(tmp_path)


@pytest.mark.parametrize("kind", sorted(SIGS))
def test_a_signature_program_runs_nothing_in_a_reflog_look(planted: Repo, kind: str) -> None:
    key, header = SIGS[kind]
    tree = _git(planted.repo, "rev-parse", "main^{tree}")
    body = (
        f"tree {tree}\nparent {planted.one}\nauthor t <t@x> 1 +0000\n"
        f"committer t <t@x> 1 +0000\ngpgsig {header}\n AAAA\n -----END-----\n\nsigned\n"
    )
    sha = subprocess.run(
        ["git", "-C", str(planted.repo), "hash-object", "-t", "commit", "-w", "--stdin"],
        input=body,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # The worker writes the base's reflog (the common dir is its to write).
    log = planted.repo / ".git" / "logs" / "refs" / "heads" / "main"
    with log.open("a") as f:
        f.write(f"{planted.one} {sha} t <t@x> 1 +0000\torchestrator: land\n")
    allowed = planted.repo / ".git" / "allowed"
    allowed.write_text("")
    _git(planted.repo, "config", "log.showSignature", "true")
    _git(planted.repo, "config", "gpg.ssh.allowedSignersFile", str(allowed))
    _git(planted.repo, "config", key, str(planted.script))

    git = SafeGit(planted.repo)
    # `_Merge._follow_killed_move`'s look at the base's reflog.
    said = git.out("log", "-g", "-1", "--format=%gs", "refs/heads/main")
    assert not planted.marker.exists(), f"{key} ran in the tick's place"
    assert said is not None and said.strip() == b"orchestrator: land"
