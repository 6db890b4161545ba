"""The landing step: a task whose last stage passed in a pipeline with
`land` is `landing`; this job lands it and records what the mode answered.

For each landing task: build the `LandRequest` from its row, take the
repository's landing lock (merge mode: the merge queue), call the mode
outside any transaction, free the lock, then record in one transaction:

- `Landed`: `complete`, the landed commit (and pull request) on the task,
  and a `landed` event;
- `SendBack`: ready at `land_to`, the hint the next attempt's; once the
  task was sent back `max_land_sendbacks` times since it was added or last
  resumed, halted `land_failed` instead, the hint its reason;
- `Refused`: halted `land_refused`, with the mode's reason (`explain`).

The ref move is the landing's commit point (`_MoveFence`): its intent is
written only while the task is still `landing` at the version read, and a
person's halt or cancel is refused from then on (`api/actions.py`), so
whichever of the two commits first wins. A tick killed anywhere in it
leaves the task `landing`; the next tick lands it again, and the mode
recognises what the dead one did (a mode is idempotent:
`landing/model.py`). The lock is a lease row (`land_locks`), never a
transaction held across the rebase and the check.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any, cast

from orchestrator.config import PipelineConfig
from orchestrator.domain.decide import HaltReason
from orchestrator.domain.event_kinds import LANDED
from orchestrator.domain.pipeline import COMPLETE, Event, State, Status
from orchestrator.ext.hooks import TickHooks
from orchestrator.ext.model import ACTOR, Claim, TickOptions
from orchestrator.ext.ports import Kernel
from orchestrator.features.landing.config import LandConfig
from orchestrator.features.landing.land_check import LandCheck, check_environment, end_left_check
from orchestrator.features.landing.lock import MoveFence, RepositoryLock
from orchestrator.features.landing.merge import land_merge
from orchestrator.features.landing.model import (
    Landed,
    LandOutcome,
    LandRequest,
    Refused,
    SendBack,
    Stopped,
)
from orchestrator.features.landing.sendbacks import send_back
from orchestrator.features.landing.store import (
    abandon_move,
    record_landed,
    release_land_lock,
)
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, read_tx
from orchestrator.storage.repo import outbox
from orchestrator.testing import fault_point
from orchestrator.workspace.gitrun import GIT_TIMEOUT, SafeGit

Mode = Callable[[LandRequest], LandOutcome]


def _pull_request(request: LandRequest) -> LandOutcome:
    """`land = "pr"`, when its module is installed (`landing.pull_request`)."""
    try:
        module: Any = importlib.import_module("orchestrator.features.landing.pull_request")
    except ImportError:
        return Refused("pr landing is not available")
    return cast(LandOutcome, module.open_pull_request(request))


# Which function lands in which mode. `merge` lands under the repository's
# lock (the merge queue); `pr` only pushes to its remote.
MODES: dict[str, Mode] = {"merge": land_merge, "pr": _pull_request}
LOCKED = frozenset({"merge"})


class Lander:
    """Lands the `landing` tasks. Touches `tasks`, `transitions`, `events`
    (through `repo.apply_transition` and the outbox) and `land_locks`
    (`store.py`); the
    task's worktree and the repository's base branch through the mode."""

    def __init__(self, kernel: Kernel, modes: dict[str, Mode] | None = None) -> None:
        self.kernel = kernel
        self.settings = kernel.settings
        self.tx = kernel.tx
        self.tick = kernel.tick
        self.me = kernel.me
        self.applier = kernel.applier
        me = kernel.me
        self.modes = MODES if modes is None else modes
        self.owner = f"{me.host}|{me.identity}|{me.pid}|{me.start_token or ''}"
        self.lock = RepositoryLock(kernel, self.owner)

    def land_all(self, only: str | None = None, *, wait: bool = True) -> None:
        """Land every landing task this host may (`only`: that one task).
        A task's worktree is on the host that claimed it, unless the
        workspaces are shared (`affinity = "any"`). Without `wait`, a
        repository whose lock is held is left for later (before the claims,
        a tick must not sit out another host's landing)."""
        if self.tick.stop.is_set() or self.tick.db_down.is_set():
            return
        for task in self.tx.retrying(lambda _again: self._landing()):
            if self.tick.stop.is_set():
                return
            if only is not None and task.slug != only:
                continue
            if self.settings.affinity == "host" and task.host not in (None, self.me.host):
                continue
            self.land(task, wait=wait)

    def _landing(self) -> list[repo.TaskSnapshot]:
        with read_tx(self.tx.engine) as conn:
            return repo.tasks_with_status(conn, Status.LANDING)

    def land(self, task: repo.TaskSnapshot, *, wait: bool = True) -> None:
        pipeline = self.settings.pipeline(task.pipeline)
        if pipeline is None or pipeline.stage(task.stage) is None:
            self.tx.retrying(functools.partial(self._halt_unknown, task))
            return
        config = pipeline.landing
        if not config.lands:  # the config stopped landing: finish as without it
            self._record(task, pipeline, _moved_before(task, pipeline))
            return
        mode = self.modes.get(config.mode)
        if mode is None:
            self._record(task, pipeline, Refused(f"no landing mode {config.mode!r}"))
            return
        request = land_request(self.kernel, self.owner, task, pipeline, config)
        if config.mode not in LOCKED:
            self._record(task, pipeline, mode(request))
            return
        key = str(request.repository)
        taken = self.lock.take(key, task, config, wait)
        if taken is None:
            self.tick.say(f"{task.slug}: landing waits for {key} (another landing holds it)")
            return
        if not taken:
            return  # landed (or moved on) by another tick while this one waited
        try:
            outcome = mode(request)
        except BaseException:
            self.tx.retrying(functools.partial(self.lock.free, key))
            raise
        # The record frees the lock in its own transaction: one commit less.
        self._record(task, pipeline, outcome, lock=key)

    # The record.

    def _record(
        self,
        task: repo.TaskSnapshot,
        pipeline: PipelineConfig,
        outcome: LandOutcome,
        *,
        lock: str | None = None,
    ) -> None:
        """Record the outcome, freeing the repository's `lock` (when held)
        in the same transaction."""
        try:
            self.tx.retrying(functools.partial(self._write, task, pipeline, outcome, lock))
        except repo.ConflictError:
            # A person halted or cancelled it meanwhile: theirs wins. The
            # rolled-back record freed nothing.
            if lock is not None:
                self.tx.retrying(functools.partial(self.lock.free, lock))
            return
        fault_point("after_land_record")

    def _write(
        self,
        task: repo.TaskSnapshot,
        pipeline: PipelineConfig,
        outcome: LandOutcome,
        lock: str | None,
        _again: bool,
    ) -> None:
        with self.tx.write() as conn:
            if lock is not None:
                release_land_lock(conn, lock, self.owner)
            current = repo.get_task_by_id(conn, task.id)
            if current is None or current.version != task.version:
                return  # recorded already (a retry whose first try committed), or moved on
            if isinstance(outcome, Stopped):
                return  # a person's halt or cancel came first (the version check above)
            now = db_now(conn)
            self.tx.ensure_tick(conn, now)
            if not isinstance(outcome, Landed) or outcome.commit is None:
                # An intent a dead landing left, which nothing moved the base to
                # (a landing without a commit lands nothing on the base).
                abandon_move(conn, current.id)
            held = (
                self.kernel.hold_finished(conn, current, outcome.commit, outcome.url)
                if isinstance(outcome, Landed)
                else None
            )
            if isinstance(outcome, Landed) and held is not None:
                # A feature follows what landed (`hold_finished`): it moves the
                # task on, and says `landed` once it is.
                repo.apply_transition(
                    conn,
                    current,
                    Event.HOLD,
                    State(current.stage, Status.HELD),
                    now=now,
                    actor=ACTOR,
                    reason=held,
                )
                record_landed(conn, current.id, outcome.commit, outcome.url)
                self.tx.say_after_commit(f"{task.slug}: held ({held})")
            elif isinstance(outcome, Landed):
                after = repo.apply_transition(
                    conn,
                    current,
                    Event.LANDED,
                    State(COMPLETE, Status.COMPLETE),
                    now=now,
                    actor=ACTOR,
                    reason=_landed_reason(current, outcome),
                )
                record_landed(conn, current.id, outcome.commit, outcome.url)
                outbox.record(
                    conn,
                    LANDED,
                    after,
                    now=now,
                    attempt_id=None,
                    stage=current.stage,
                    run=current.run,
                    facts={
                        "state": str(after.state),
                        "branch": current.branch,
                        "base_branch": current.base_branch,
                        "commit": outcome.commit,
                        "url": outcome.url,
                        "mode": pipeline.landing.mode,
                    },
                )
                self.tx.say_after_commit(
                    f"{task.slug}: landed -> {_landed_reason(current, outcome)}"
                )
            elif isinstance(outcome, SendBack):
                said, halted = send_back(conn, current, pipeline, outcome, now)
                if halted:
                    self.tick.halted()
                self.tx.say_after_commit(f"{task.slug}: {said}")
            else:
                repo.apply_transition(
                    conn,
                    current,
                    Event.GIVE_UP,
                    State(current.stage, Status.HALTED),
                    now=now,
                    actor=ACTOR,
                    reason=outcome.reason,
                    halt_reason=HaltReason.LAND_REFUSED.value,
                )
                self.tick.halted()
                self.tx.say_after_commit(f"{task.slug}: halted (land_refused: {outcome.reason})")

    def _halt_unknown(self, task: repo.TaskSnapshot, _again: bool) -> None:
        with self.tx.write() as conn:
            current = repo.get_task_by_id(conn, task.id)
            if current is None or current.version != task.version:
                return
            now = db_now(conn)
            self.tx.ensure_tick(conn, now)
            self.applier.halt_unknown(conn, current, now)


def _landed_reason(task: repo.TaskSnapshot, outcome: Landed) -> str:
    if outcome.url:
        return f"pull request {outcome.url}"
    if outcome.commit:
        return f"{task.base_branch} at {outcome.commit[:12]}"
    return "nothing to land"


def _moved_before(task: repo.TaskSnapshot, pipeline: PipelineConfig) -> Landed:
    """What a task finishing without landing has landed: nothing, unless
    a landing killed past its commit point moved the base to its intent
    (`landed_commit` on a `landing` task) before the config stopped
    landing; then that move, so it is recorded as it happened. An
    intent the base does not hold is dropped by the record."""
    intent = task.landed_commit
    if intent is None or pipeline.repository is None:
        return Landed()
    base = task.base_branch or pipeline.base or "main"
    git = SafeGit(pipeline.repository, timeout=GIT_TIMEOUT)
    held = git.run("merge-base", "--is-ancestor", intent, f"refs/heads/{base}")
    return Landed(commit=intent) if held.ok else Landed()


def land_request(
    kernel: Kernel,
    owner: str,
    task: repo.TaskSnapshot,
    pipeline: PipelineConfig,
    config: LandConfig,
) -> LandRequest:
    """What a mode is handed to land `task`: its branch and base, the check's
    environment, and the commit point fenced by this landing's lock."""
    assert pipeline.repository is not None
    check_env = check_environment(kernel.settings, task.slug, config.secrets)
    return LandRequest(
        slug=task.slug,
        title=task.title,
        body=task.body,
        repository=pipeline.repository,
        worktree=kernel.settings.workspace_root / task.slug,
        branch=task.branch or f"task/{task.slug}",
        base_branch=task.base_branch or pipeline.base or "main",
        remote=config.remote,
        env=check_env,
        timeout=config.timeout,
        check=config.check,
        committer=pipeline.commit_author,
        commit_point=MoveFence(kernel.tx, task, str(pipeline.repository), owner),
        run_check=LandCheck(kernel, pipeline, task.id, task.slug, task.stage),
    )


def tick_hooks(kernel: Kernel) -> TickHooks:
    """The landing's points in a tick: what earlier ticks left lands before
    the claims (without waiting on another host's lock), what this tick's
    attempts finished lands after them; and before an attempt's commands
    run in a worktree, a land check a killed tick left there is ended."""
    lander = Lander(kernel)
    settings = kernel.settings

    def before_claims(options: TickOptions) -> None:
        lander.land_all(options.task, wait=False)

    def after_claims(options: TickOptions) -> None:
        lander.land_all(options.task)

    def before_workspace(claim: Claim) -> None:
        end_left_check(settings, claim.task.id, claim.task.slug)

    return TickHooks(
        before_claims=before_claims,
        after_claims=after_claims,
        before_workspace=before_workspace,
    )
