"""A git workspace's changes, read without running anything the worker configured.

The repository is the worker's, and so is its `.git/config` and
`.gitattributes`: `core.fsmonitor`, hooks, textconv, external diff and
clean/process filter drivers are all commands git would run in the
reviewer's process. Every call here turns them off, ignores the system and
global config, and never pages. Names come from `-z` listings (never from
diff text, whose content lines can look like headers).

The diff is against the commit the stage started from (the newest commit
older than the stage's first attempt), so work the worker committed shows;
when every commit is newer, every tracked file is listed as the stage's.
HEAD's sha is in the hash, so a commit after the look changes it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
import time
from datetime import datetime
from pathlib import Path

from orchestrator.workspace.changes import (
    MARKDOWN_SUFFIXES,
    SHOWN_BYTES,
    WorkspaceChanges,
    add_files,
    add_markdown,
    hash_file,
)

GIT_TIMEOUT = 30.0
SAFE_CONFIG = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.attributesFile=/dev/null",
    "diff.external=",
    "core.untrackedCache=false",
    "protocol.allow=never",  # no lazy fetch of a partial clone's missing objects
)
_DROPPED_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_EXTERNAL_DIFF", "GIT_PAGER")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_OPTIONAL_LOCKS="0",
        GIT_TERMINAL_PROMPT="0",
        GIT_PAGER="cat",
        PAGER="cat",
        LC_ALL="C",
    )
    return env


class Git:
    """One workspace's git, with the worker's commands switched off. All
    calls share one deadline: a config `include.path` naming a FIFO hangs
    every git command, and the gate must still answer."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.deadline = time.monotonic() + GIT_TIMEOUT
        self.config = [arg for pair in SAFE_CONFIG for arg in ("-c", pair)]
        overrides = self._filter_overrides()
        self.usable = overrides is not None
        self.config += overrides or []

    def argv(self, *args: str) -> list[str]:
        # --work-tree: a `core.worktree` in the worker's config would diff
        # (and show) files outside the workspace, the reviewer's included.
        where = [
            "-C",
            str(self.workspace),
            f"--git-dir={self.workspace / '.git'}",  # no search up the parents
            f"--work-tree={self.workspace}",
        ]
        return ["git", "--no-pager", *where, *self.config, *args]

    def call(self, *args: str) -> tuple[int, bytes] | None:
        """(exit status, stdout), or None when git could not run in time."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            done = subprocess.run(
                self.argv(*args),
                capture_output=True,
                timeout=left,
                check=False,
                stdin=subprocess.DEVNULL,
                env=_env(),
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.returncode, done.stdout

    def run(self, *args: str) -> bytes | None:
        answer = self.call(*args)
        return answer[1] if answer is not None and answer[0] == 0 else None

    def head_of(self, limit: int, *args: str) -> tuple[bytes, bool] | None:
        """The first `limit` bytes of the output, and whether there was more:
        a huge diff is cut at the pipe, not read whole."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            with subprocess.Popen(
                self.argv(*args),
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                env=_env(),
            ) as proc:
                timer = threading.Timer(left, proc.kill)  # a read blocks past any timeout
                timer.start()
                try:
                    assert proc.stdout is not None
                    data = proc.stdout.read(limit + 1)
                    if len(data) > limit:
                        proc.kill()
                    code = proc.wait()
                finally:
                    timer.cancel()
        except OSError:
            return None
        if len(data) > limit:
            return data[:limit], True
        return (data, False) if code == 0 else None

    def _filter_overrides(self) -> list[str] | None:
        """`-c filter.X.clean=` (and process, smudge) for every filter driver
        the repository's config names: an empty command is no filter. None
        when the config cannot be read: then no git command is safe to run."""
        answer = self.call("config", "--name-only", "--get-regexp", r"^filter\.")
        if answer is None or answer[0] not in (0, 1):  # 1: no such key
            return None
        overrides: list[str] = []
        drivers: set[str] = set()
        for key in answer[1].decode("utf-8", "replace").splitlines():
            driver, _, _ = key.removeprefix("filter.").rpartition(".")
            drivers.add(driver)
        for driver in sorted(drivers):
            for setting in ("clean=", "smudge=", "process=", "required=false"):
                overrides += ["-c", f"filter.{driver}.{setting}"]
        return overrides


def git_changes(workspace: Path, since: datetime | None) -> WorkspaceChanges | None:
    """None when this is not a usable repository (the caller lists files instead)."""
    git = Git(workspace)
    if not git.usable:
        return None
    head_sha = (git.run("rev-parse", "--verify", "-q", "HEAD") or b"").decode().strip()
    base = _base(git, since) if head_sha else ""
    flags = ("--no-color", "--no-textconv", "--no-ext-diff")
    if base:  # the stage's work: what changed since its starting commit
        against, label, every_tracked = [base], base[:12], False
    elif head_sha:  # every commit is the stage's: each tracked file is its work
        against, label, every_tracked = ["HEAD"], "HEAD (every commit is the stage's)", True
    else:  # no commit yet: what is staged
        against, label, every_tracked = ["--cached"], "nothing (no commit yet)", False
    diff = git.head_of(SHOWN_BYTES, "diff", *flags, *against)
    if every_tracked:
        names = git.run("ls-files", "-z")
    else:
        names = git.run("diff", "--name-only", "-z", *flags, *against)
    untracked = git.run("ls-files", "--others", "--exclude-standard", "-z")
    if diff is None or names is None or untracked is None:
        return None
    changes = WorkspaceChanges(kind="git", base=label)
    shown, changes.diff_truncated = diff
    changes.diff = shown.decode("utf-8", "replace")
    changes.digest_parts += [f"git-head:{head_sha}", f"git-base:{base}"]
    changes.digest_parts.append("git-diff:" + hashlib.sha256(shown).hexdigest())
    tracked = _split(names)
    if every_tracked:
        add_files(changes, workspace, sorted({*tracked, *_split(untracked)}))
        return changes
    # Tracked changes hashed by content (the shown diff may be cut); the
    # page lists them through the diff itself.
    for name in tracked:
        digest, size = hash_file(workspace, name)
        changes.digest_parts.append(f"tracked:{name}:{size}:{digest}")
    add_files(changes, workspace, _split(untracked))
    for name in tracked:
        if name.endswith(MARKDOWN_SUFFIXES):
            add_markdown(changes, workspace, name)
    return changes


def _base(git: Git, since: datetime | None) -> str:
    """The newest commit before the stage began (HEAD without a start time);
    "" when every commit is the stage's."""
    if since is None:
        found = git.run("rev-parse", "--verify", "-q", "HEAD")
    else:
        # Commit times are whole seconds and --before includes its second: a
        # commit in the stage's first second counts as the stage's.
        before = int(since.timestamp()) - 1
        found = git.run("rev-list", "-1", f"--before={before}", "HEAD")
    return (found or b"").decode().strip()


def _split(listing: bytes) -> list[str]:
    return sorted(n for n in listing.decode("utf-8", "surrogateescape").split("\0") if n)
