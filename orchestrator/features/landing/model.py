"""What a landing mode is given and what it answers.

A mode never touches the database: the tick's landing step builds the
request from the task's row and records the outcome, so a mode can be
tested on a real repository alone, and run again after a crash (every mode
must be idempotent: a second call after a crash finishes what the first
started and never pushes, moves a ref or opens a pull request twice).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from orchestrator.runner.capture import ProcessResult

# Runs the check: (argv, worktree, environment, timeout).
CheckRunner = Callable[[Sequence[str], Path, Mapping[str, str], float], ProcessResult]


class CommitPoint(Protocol):
    """The one place a landing and a person's command decide who wins.

    A mode that moves a ref calls `begin` just before the move: it records,
    in one transaction, the intent to move the base to `commit`, only if
    the task is still `landing` at the version the landing read (False: a
    person halted or cancelled it first; nothing may move). From then on a
    person's halt or cancel is refused ("already landing") until the
    landing is recorded, so a move never follows a successful cancel and
    one that happened is always recorded. `abandon` withdraws the intent
    when the move did not happen (the base moved under it: rebase again).
    """

    def begin(self, commit: str) -> bool: ...

    def abandon(self) -> None: ...


@dataclass(frozen=True)
class StageReasons:
    """One passed stage's verdict reasons, for a pull request's body."""

    stage: str
    score: float | None
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class LandRequest:
    slug: str
    title: str
    body: str  # the task's text
    repository: Path  # the main repository's root
    worktree: Path  # the task's worktree, on `branch`
    branch: str  # `task/<slug>`
    base_branch: str
    remote: str = "origin"
    stages: tuple[StageReasons, ...] = ()
    draft: bool = False
    # The environment for `git push` and `gh` (GH_HOST, GH_TOKEN from the
    # landing's secrets); nothing else of the tick's environment.
    env: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 120.0
    # `merge`: the argv run in the worktree on the rebased tip (None: no
    # check), with `env` as its whole environment, and who the rebased
    # commits' committer is ("Name <email>"; their authors stay).
    check: tuple[str, ...] | None = None
    committer: str = "orchestrator <orchestrator@localhost>"
    # The tick's guard around the ref move (None: nothing races it, as in
    # a mode's own tests).
    commit_point: CommitPoint | None = None
    # How the check is run: the tick's (tagged, noted, in the stage's
    # walls: `land_check.py`); None runs it plainly (a mode alone).
    run_check: CheckRunner | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Landed:
    """The change reached its target: `commit` is the landed (merge) or
    pushed (pr) commit, `url` the pull request's address."""

    commit: str | None = None
    url: str | None = None


@dataclass(frozen=True)
class SendBack:
    """A conflict or a failing check: the task goes back to `land_to` with
    `hint` (the conflicting files, the check's output tail); the branch is
    as it was before the landing began."""

    hint: str
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class Refused:
    """The landing cannot go on without a person (a push refused, `gh`
    missing or unauthenticated): the task halts with `reason`."""

    reason: str


@dataclass(frozen=True)
class Stopped:
    """A person halted or cancelled the task before the ref move: nothing
    moved, the branch is as it was; nothing is recorded (theirs was)."""


LandOutcome = Landed | SendBack | Refused | Stopped
