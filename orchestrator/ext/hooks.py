"""What a feature declares: a `Feature` (its name and what it adds), and
the `TickHooks` its `tick` factory builds once per `Ticker`.

A hook is a typed field, not a name looked up at run time: mypy checks
each one where a feature sets it and where the engine calls it. Only the
points a moved feature needs exist; a new point comes with the feature
that needs it (`docs/decisions/extension-seam.md`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Annotations only: a feature's package (which config reads its keys
    # from) can declare its `Feature` without loading the engine's vocabulary.
    from sqlalchemy import Connection

    from orchestrator.config import StageConfig
    from orchestrator.ext.model import AttemptRun, Claim, Command, Refusal, TickOptions
    from orchestrator.ext.ports import Kernel


@dataclass(frozen=True)
class TickHooks:
    """The points where the engine calls a feature during a tick. Every
    field is optional; the `Registry` keeps only those set, in `FEATURES`
    order, and calls each one that is set ("each" dispatch)."""

    before_claims: Callable[[TickOptions], None] | None = None
    """After recovery and the approved gates' advance, before the first
    claim; outside any transaction. May write through `Kernel.tx` (its own
    short transactions) and run commands. Finishes what earlier ticks
    left (a task waiting to land) without waiting on another host."""

    after_claims: Callable[[TickOptions], None] | None = None
    """After the claim loop ended and every attempt of this tick was
    recorded; outside any transaction, before the tick's row is closed.
    May write and run commands as `before_claims`."""

    before_workspace: Callable[[Claim], None] | None = None
    """On the attempt's thread, before the task's worktree is made and
    before any command of the attempt runs in it; outside any transaction.
    May end processes and remove files of its own; must not write the
    database (the attempt's fence is the engine's). Called on the hot
    path: a feature with nothing to do returns after one cheap look."""

    refuse_claim: Callable[[Connection, StageConfig, datetime], Refusal | None] | None = None
    """Inside the claim's transaction (its `Connection`, no command runner),
    once the claim has found a task of `StageConfig` and before it opens the
    attempt; `datetime` is the database's now. May lock and write its own
    rows, which commit with the claim when it admits; a refusal must leave
    nothing held or written (on PostgreSQL, roll back to a savepoint), since
    the claim goes on to other tasks in the same transaction. The first
    refusal wins ("first non-None"): later features are not asked. Called
    per candidate task: a stage it does not govern returns None at once."""

    would_refuse: Callable[[Connection, StageConfig, datetime], Refusal | None] | None = None
    """The dry run's `refuse_claim`: the refusal a claim would meet now,
    inside the dry run's read transaction. Reads only: no lock, no write.
    First non-None, as `refuse_claim`."""

    after_run: Callable[[Claim, AttemptRun, Path], None] | None = None
    """On the attempt's thread, once worker, verifier and the runaway
    guards are done with the attempt and before the transaction that
    records it; outside any transaction. May read the attempt's folder
    (`Path`) and change the `AttemptRun` (its outcome, error, backoff, what
    it carries to `after_record`); must not write the database or run
    commands. Called for every attempt: return at once when not concerned."""

    after_record: Callable[[Connection, Claim, AttemptRun, datetime], None] | None = None
    """Inside the transaction recording the attempt (its `Connection`, no
    command runner), after the attempt's row is closed and its decision
    applied; `datetime` is the database's now. May write its own rows and
    events (through the outbox), which commit with the record or not at
    all, and say a line after the commit (`Kernel.tx.say_after_commit`).
    Runs again when the record's transaction is retried."""

    wrap_command: Callable[[Command], tuple[str, ...] | None] | None = None
    """Just before the engine starts a command (setup, worker, verifier) or
    a feature asks the kernel to (`Kernel.wrap`: the land check), on the
    thread that starts it (the attempt's, the tick's for the land check),
    after its argv is rendered; outside any transaction. Returns the argv
    to run instead (the command inside walls), or None when not concerned:
    the first non-None wins, and later features are not asked. May look at
    the host's files (what the walls bind back) and raise `ConfigError` to
    refuse a command that could never run there (not started, not charged:
    the tick stops, 78); must not start processes or write files or the
    database. Called for every command: a command whose config asks for
    nothing returns None at once, importing nothing. A `Command.confined`
    that no hook wraps is refused by the engine (fail closed)."""


@dataclass(frozen=True)
class Feature:
    """One capability, registered by one line in `features/__init__.py`.

    `tables` names the module holding its tables (imported lazily, so
    `--help` loads no SQLAlchemy); `config` is where its config sections go
    once the config schema takes them; `commands` maps a CLI name to
    "module:attr"."""

    name: str
    config: Sequence[object] = ()
    tables: str | None = None
    commands: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    tick: Callable[[Kernel], TickHooks] | None = None
