"""What a feature declares: a `Feature` (its name and what it adds), and
the `TickHooks` its `tick` factory builds once per `Ticker`.

A hook is a typed field, not a name looked up at run time: mypy checks
each one where a feature sets it and where the engine calls it. Only the
points a moved feature needs exist; a new point comes with the feature
that needs it (`docs/decisions/extension-seam.md`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Annotations only: a feature's package (which config reads its keys
    # from) can declare its `Feature` without loading the engine's vocabulary.
    from orchestrator.ext.model import Claim, TickOptions
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
