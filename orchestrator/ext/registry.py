"""How the engine calls the features: one `Registry` per `Ticker`, built
once from the features' `TickHooks`, a tuple per hook point.

Order is behaviour: the hooks of a point run in `FEATURES` order. The
engine calls a point through the registry's method, which iterates its
tuple; nothing is looked up per attempt, and a point no feature uses is
an empty tuple (a point on the hot path costs one empty loop)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, cast

from sqlalchemy import Connection

from orchestrator.config import PipelineConfig, Settings, StageConfig
from orchestrator.errors import ConfigError
from orchestrator.ext.hooks import Feature, TickHooks
from orchestrator.ext.model import (
    AttemptRun,
    Claim,
    ClaimSearch,
    Command,
    CommandRan,
    Refusal,
    RoundEnd,
    Slot,
    TickOptions,
    TickReport,
)
from orchestrator.ext.ports import Kernel
from orchestrator.storage import repo

_H = TypeVar("_H")


class Registry:
    """The features' tick hooks, per point, in registration order."""

    def __init__(self, features: Sequence[Feature], kernel: Kernel) -> None:
        self.names = tuple(f.name for f in features)
        built = [f.tick(kernel) for f in features if f.tick is not None]
        self._tick_started = _each(built, lambda h: h.tick_started)
        self._tick_ended = _each(built, lambda h: h.tick_ended)
        self._command_ended = _each(built, lambda h: h.command_ended)
        self._before_claims = _each(built, lambda h: h.before_claims)
        self._after_claims = _each(built, lambda h: h.after_claims)
        self._before_workspace = _each(built, lambda h: h.before_workspace)
        self._attempt_workspace = _each(built, lambda h: h.attempt_workspace)
        self._around_workspace = _each(built, lambda h: h.around_workspace)
        self._note_start = _each(built, lambda h: h.note_start)
        self._attempt_env = _each(built, lambda h: h.attempt_env)
        self._keep_work = _each(built, lambda h: h.keep_work)
        self._after_recorded = _each(built, lambda h: h.after_recorded)
        self._after_recovery = _each(built, lambda h: h.after_recovery)
        self._refuse_claim = _each(built, lambda h: h.refuse_claim)
        self._leave_task = _each(built, lambda h: h.leave_task)
        self._pipeline_of = _each(built, lambda h: h.pipeline_of)
        self._after_claim = _each(built, lambda h: h.after_claim)
        self._would_refuse = _each(built, lambda h: h.would_refuse)
        self._claim_first = _each(built, lambda h: h.claim_first)
        self._open_attempt = _each(built, lambda h: h.open_attempt)
        self._slot_of = _each(built, lambda h: h.slot_of)
        self._decide_round = _each(built, lambda h: h.decide_round)
        self._after_run = _each(built, lambda h: h.after_run)
        # A feature's own claims (`claim_first`) pass over a row another
        # transaction holds: the claim loop looks for them again each
        # second while attempts run, not only when one ends.
        self.claims_recheck = bool(self._claim_first)
        # Whether any attempt row may be a round's (`slot_of`): without one,
        # no read is made to ask.
        self.has_slots = bool(self._slot_of)
        self._after_record = _each(built, lambda h: h.after_record)
        self._added = tuple(f.added for f in features if f.added is not None)
        self._open_gate = _each(built, lambda h: h.open_gate)
        self._wrap_command = _each(built, lambda h: h.wrap_command)
        self._hold_finished = _each(built, lambda h: h.hold_finished)
        self._attempt_feedback = _each(built, lambda h: h.attempt_feedback)

    @classmethod
    def empty(cls) -> Registry:
        """No feature: the engine alone, for a job built outside a `Ticker`
        (a test's). No factory runs, so no kernel is needed."""
        return cls((), cast(Kernel, None))

    def tick_started(self, options: TickOptions) -> None:
        for hook in self._tick_started:
            hook(options)

    def tick_ended(self, options: TickOptions, report: TickReport, status: int) -> None:
        for hook in self._tick_ended:
            hook(options, report, status)

    def command_ended(self, claim: Claim, command: Command, ran: CommandRan) -> None:
        for hook in self._command_ended:
            hook(claim, command, ran)

    def before_claims(self, options: TickOptions) -> None:
        for hook in self._before_claims:
            hook(options)

    def after_claims(self, options: TickOptions) -> None:
        for hook in self._after_claims:
            hook(options)

    def before_workspace(self, claim: Claim) -> None:
        for hook in self._before_workspace:
            hook(claim)

    def attempt_workspace(self, claim: Claim) -> Path | None:
        return _first(self._attempt_workspace, claim)

    def around_workspace(
        self, claim: Claim, make: Callable[[], AttemptRun | None]
    ) -> AttemptRun | None:
        """`make` (the engine's), wrapped by each feature's hook, the first
        registered outermost."""
        for hook in reversed(self._around_workspace):
            make = functools.partial(hook, claim, make)
        return make()

    def attempt_env(self, claim: Claim) -> dict[str, str]:
        """The features' variables for the attempt (`TickHooks.attempt_env`);
        a name outside ORCHESTRATOR_* is a feature's bug, refused loudly."""
        found: dict[str, str] = {}
        for hook in self._attempt_env:
            for name, value in (hook(claim) or {}).items():
                if not name.startswith("ORCHESTRATOR_"):
                    raise ValueError(f"attempt_env: {name!r} is not an ORCHESTRATOR_ variable")
                found[name] = value
        return found

    def note_start(self, claim: Claim) -> bool:
        return any(hook(claim) for hook in self._note_start)

    def keep_work(self, claim: Claim, workspace: Path, run: AttemptRun) -> bool:
        return any(hook(claim, workspace, run) for hook in self._keep_work)

    def after_recorded(self, claim: Claim) -> None:
        for hook in self._after_recorded:
            hook(claim)

    def after_recovery(self) -> None:
        for hook in self._after_recovery:
            hook()

    def refuse_claim(self, conn: Connection, stage: StageConfig, now: datetime) -> Refusal | None:
        return _first(self._refuse_claim, conn, stage, now)

    def leave_task(self, conn: Connection, task: repo.TaskSnapshot) -> str | None:
        """Why a feature leaves `task` unclaimed now; None: nobody does."""
        return _first(self._leave_task, conn, task)

    def pipeline_of(
        self, conn: Connection, task: repo.TaskSnapshot, configured: PipelineConfig | None
    ) -> PipelineConfig | None:
        """The pipeline `task` runs: a feature's answer, else `configured`."""
        for hook in self._pipeline_of:
            if (pipeline := hook(conn, task, configured)) is not None:
                return pipeline
        return configured

    def after_claim(self, conn: Connection, claim: Claim, now: datetime) -> None:
        for hook in self._after_claim:
            hook(conn, claim, now)

    def would_refuse(self, conn: Connection, stage: StageConfig, now: datetime) -> Refusal | None:
        return _first(self._would_refuse, conn, stage, now)

    def claim_first(self, conn: Connection, search: ClaimSearch) -> Claim | None:
        return _first(self._claim_first, conn, search)

    def open_attempt(
        self,
        conn: Connection,
        task: repo.TaskSnapshot,
        stage: StageConfig,
        columns: dict[str, Any],
    ) -> tuple[int, Slot] | None:
        return _first(self._open_attempt, conn, task, stage, columns)

    def hold_finished(
        self, conn: Connection, task: repo.TaskSnapshot, commit: str | None, url: str | None
    ) -> str | None:
        return _first(self._hold_finished, conn, task, commit, url)

    def attempt_feedback(self, claim: Claim, folder: Path) -> tuple[str, Path] | None:
        return _first(self._attempt_feedback, claim, folder)

    def slot_of(self, conn: Connection, attempt_id: int) -> Slot | None:
        return _first(self._slot_of, conn, attempt_id)

    def decide_round(
        self, conn: Connection, task: repo.TaskSnapshot, slot: Slot, now: datetime
    ) -> RoundEnd:
        """The first feature's answer; a slot no feature decides (none
        could have opened it) is left undecided."""
        for hook in self._decide_round:
            return hook(conn, task, slot, now)
        return RoundEnd(None, "")

    def after_run(self, claim: Claim, run: AttemptRun, folder: Path) -> None:
        for hook in self._after_run:
            hook(claim, run, folder)

    def after_record(self, conn: Connection, claim: Claim, run: AttemptRun, now: datetime) -> None:
        for hook in self._after_record:
            hook(conn, claim, run, now)

    def tasks_added(
        self, conn: Connection, settings: Settings, added: Mapping[str, str], now: datetime
    ) -> None:
        """`Feature.added`, for tasks added from inside a tick (an agent's
        `add_subtask` through the door the tick serves)."""
        for hook in self._added:
            hook(conn, settings, added, now)

    def open_gate(self, conn: Connection, claim: Claim, now: datetime) -> str | None:
        return _first(self._open_gate, conn, claim, now)

    def wrap_command(self, command: Command) -> tuple[str, ...]:
        """The argv to start for `command`: the first feature's wrap, else
        the command as it is. Fails closed: a command whose config asks for
        walls (`Command.confined`) that no feature wrapped is refused with
        a `ConfigError`, never run unwrapped."""
        for hook in self._wrap_command:
            if (wrapped := hook(command)) is not None:
                return wrapped
        if command.confined:
            raise ConfigError(
                f"{command.name} of stage {command.stage.name if command.stage else '?'}: "
                "its config asks for a sandbox and no registered feature wraps commands; "
                "refusing to run it unwrapped"
            )
        return command.argv


def tasks_added(
    features: Sequence[Feature],
    conn: Connection,
    settings: Settings,
    added: Mapping[str, str],
    now: datetime,
) -> None:
    """`add`'s point (`Feature.added`), in `features` order: not part of a
    tick, so not kept by a `Registry`."""
    for feature in features:
        if feature.added is not None:
            feature.added(conn, settings, added, now)


def _first(hooks: tuple[Callable[..., _H | None], ...], *args: Any) -> _H | None:
    """ "First non-None wins": later features are not asked."""
    for hook in hooks:
        if (found := hook(*args)) is not None:
            return found
    return None


def _each(built: Sequence[TickHooks], point: Callable[[TickHooks], _H | None]) -> tuple[_H, ...]:
    return tuple(hook for hooks in built if (hook := point(hooks)) is not None)
