"""The part of the engine a feature may use, as Protocols: the tick's jobs
(`tick/`) satisfy them structurally, so a feature is typed against them
and never imports `tick/`. Each port is as narrow as the features that use
it need; widen one when a feature moves here and needs more, not before."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol, TypeVar

from sqlalchemy import Connection, Engine

from orchestrator.config import Settings
from orchestrator.domain.decide import Decision
from orchestrator.domain.pipeline import State
from orchestrator.ext.model import Command
from orchestrator.storage import repo

_T = TypeVar("_T")


class TxPort(Protocol):
    """How a feature writes: one transaction at a time, retried while the
    connection is lost (`tick/transactions.py`). Lines said inside one are
    printed only once it commits."""

    @property
    def engine(self) -> Engine: ...

    def retrying(self, fn: Callable[[bool], _T]) -> _T: ...

    def write(self) -> AbstractContextManager[Connection]: ...

    def ensure_tick(self, conn: Connection, now: datetime) -> int: ...

    def say_after_commit(self, line: str) -> None: ...


class RunPort(Protocol):
    """The tick being run (`tick/tick_run.py`): whether to stop, what to
    say, and how a feature counts a halt it made."""

    @property
    def stop(self) -> threading.Event: ...

    @property
    def db_down(self) -> threading.Event: ...

    def say(self, line: str) -> None: ...

    def warn(self, line: str) -> None: ...

    def halted(self) -> None: ...


class HostPort(Protocol):
    """Who this tick is (`tick/host.py`), to tell its own leases from a dead
    tick's."""

    @property
    def host(self) -> str: ...

    @property
    def identity(self) -> str: ...

    @property
    def pid(self) -> int: ...

    @property
    def start_token(self) -> str | None: ...


class ApplierPort(Protocol):
    """The state machine's writer (`tick/applier.py`), inside the caller's
    transaction."""

    def halt_unknown(self, conn: Connection, task: repo.TaskSnapshot, now: datetime) -> None: ...

    def apply(
        self,
        conn: Connection,
        task: repo.TaskSnapshot,
        decision: Decision,
        attempt_id: int,
        now: datetime,
    ) -> State: ...


class Kernel(Protocol):
    """What `Feature.tick` is handed once per `Ticker`: the same
    collaborators the engine's own jobs are built from."""

    @property
    def settings(self) -> Settings: ...

    @property
    def tx(self) -> TxPort: ...

    @property
    def tick(self) -> RunPort: ...

    @property
    def me(self) -> HostPort: ...

    @property
    def applier(self) -> ApplierPort: ...

    def wrap(self, command: Command) -> tuple[str, ...]:
        """The argv to start for a feature's own command (the land check):
        the registered `wrap_command` hooks', refused with `ConfigError`
        when its config asks for walls and no feature wraps it, as the
        engine does for an attempt's commands."""
        ...

    def hold_finished(
        self, conn: Connection, task: repo.TaskSnapshot, commit: str | None, url: str | None
    ) -> str | None:
        """The features' `hold_finished` (`TickHooks`), for the landing's
        record: the reason a feature holds the landed task, or None."""
        ...
