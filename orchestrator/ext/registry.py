"""How the engine calls the features: one `Registry` per `Ticker`, built
once from the features' `TickHooks`, a tuple per hook point.

Order is behaviour: the hooks of a point run in `FEATURES` order. The
engine calls a point through the registry's method, which iterates its
tuple; nothing is looked up per attempt, and a point no feature uses is
an empty tuple (a point on the hot path costs one empty loop)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TypeVar, cast

from sqlalchemy import Connection

from orchestrator.config import StageConfig
from orchestrator.errors import ConfigError
from orchestrator.ext.hooks import Feature, TickHooks
from orchestrator.ext.model import AttemptRun, Claim, Command, Refusal, TickOptions
from orchestrator.ext.ports import Kernel

_H = TypeVar("_H")


class Registry:
    """The features' tick hooks, per point, in registration order."""

    def __init__(self, features: Sequence[Feature], kernel: Kernel) -> None:
        self.names = tuple(f.name for f in features)
        built = [f.tick(kernel) for f in features if f.tick is not None]
        self._before_claims = _each(built, lambda h: h.before_claims)
        self._after_claims = _each(built, lambda h: h.after_claims)
        self._before_workspace = _each(built, lambda h: h.before_workspace)
        self._refuse_claim = _each(built, lambda h: h.refuse_claim)
        self._would_refuse = _each(built, lambda h: h.would_refuse)
        self._after_run = _each(built, lambda h: h.after_run)
        self._after_record = _each(built, lambda h: h.after_record)
        self._wrap_command = _each(built, lambda h: h.wrap_command)

    @classmethod
    def empty(cls) -> Registry:
        """No feature: the engine alone, for a job built outside a `Ticker`
        (a test's). No factory runs, so no kernel is needed."""
        return cls((), cast(Kernel, None))

    def before_claims(self, options: TickOptions) -> None:
        for hook in self._before_claims:
            hook(options)

    def after_claims(self, options: TickOptions) -> None:
        for hook in self._after_claims:
            hook(options)

    def before_workspace(self, claim: Claim) -> None:
        for hook in self._before_workspace:
            hook(claim)

    def refuse_claim(self, conn: Connection, stage: StageConfig, now: datetime) -> Refusal | None:
        for hook in self._refuse_claim:
            if (refusal := hook(conn, stage, now)) is not None:
                return refusal
        return None

    def would_refuse(self, conn: Connection, stage: StageConfig, now: datetime) -> Refusal | None:
        for hook in self._would_refuse:
            if (refusal := hook(conn, stage, now)) is not None:
                return refusal
        return None

    def after_run(self, claim: Claim, run: AttemptRun, folder: Path) -> None:
        for hook in self._after_run:
            hook(claim, run, folder)

    def after_record(self, conn: Connection, claim: Claim, run: AttemptRun, now: datetime) -> None:
        for hook in self._after_record:
            hook(conn, claim, run, now)

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


def _each(built: Sequence[TickHooks], point: Callable[[TickHooks], _H | None]) -> tuple[_H, ...]:
    return tuple(hook for hooks in built if (hook := point(hooks)) is not None)
