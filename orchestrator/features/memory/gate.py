"""The tick's side of `memory_mb`: whether a claim may start one more
attempt on this host, given what the host has and what its running
attempts reserved.

The reservation is the stage's `memory_mb`, not what the attempt's
processes use: an agent starts small and grows to its 1.5-2 GB over
minutes, so `MemAvailable` alone would admit fifteen sessions in the
instant before any of them grew (what ran a 24 GB host out of memory).
Subtracting the reservations of the attempts already running keeps the
sum of what may grow within what the host had.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from orchestrator.agents import kinds
from orchestrator.config import Settings, StageConfig
from orchestrator.ext.hooks import TickHooks
from orchestrator.ext.model import Refusal
from orchestrator.features.memory import meminfo
from orchestrator.features.memory import store as memory_rows

if TYPE_CHECKING:
    from orchestrator.ext.ports import Kernel

# How the dry run words the tasks a refusal passes over with the one asked.
_PASSED_OVER = "nor would the tasks of stages needing as much memory"


def tick_hooks(kernel: Kernel) -> TickHooks:
    """The claim's refusal and the dry run's, the same rule; none at all
    when no stage of the config reserves memory (a feature not used costs
    no call)."""
    gate = MemoryGate(kernel.settings)
    if not gate.used:
        return TickHooks()

    def refuse_claim(conn: Connection, stage: StageConfig, now: datetime) -> Refusal | None:
        return gate.refusal(conn, stage, kernel.me.host)

    return TickHooks(refuse_claim=refuse_claim, would_refuse=refuse_claim)


def needed_mb(stage: StageConfig) -> int:
    """What an attempt of `stage` reserves: its `memory_mb`, else the most
    its worker's and verifier's agent kinds hold (they run one after the
    other), 0 for plain commands."""
    if stage.memory_mb is not None:
        return stage.memory_mb
    found = 0
    for fmt in (stage.output, stage.verifier_output):
        kind = kinds.reading(fmt)
        if kind is not None:
            found = max(found, kind.memory_mb)
    return found


def gigabytes(mb: int) -> str:
    """MiB as a person reads them: 1229 -> "1.2", 2048 -> "2"."""
    text = f"{max(mb, 0) / 1024:.1f}"
    return text.removesuffix(".0")


def waiting_line(free_mb: int, needed: int) -> str:
    return f"waiting for memory: {gigabytes(free_mb)} GB free, {gigabytes(needed)} GB needed"


class MemoryGate:
    """Admits claims by the host's memory. Reads `attempts` and `tasks` (the
    attempts open on this host) and `/proc/meminfo`; writes nothing, so a
    refusal leaves nothing to roll back and the dry run asks the same."""

    def __init__(self, settings: Settings) -> None:
        self._needs = {
            (pipeline.name, stage.name): needed_mb(stage)
            for pipeline in settings.pipelines.values()
            for stage in pipeline.stages
        }
        self.used = any(self._needs.values())

    def reserved_mb(self, conn: Connection, host: str) -> int:
        """What the attempts open on `host` reserved, priced by the config
        (an attempt of a stage the config lost reserves nothing)."""
        return sum(
            self._needs.get((pipeline, stage), 0) * count
            for pipeline, stage, count in memory_rows.open_here(conn, host)
        )

    def free_mb(self, conn: Connection, host: str) -> int | None:
        """`MemAvailable` less the reservations on `host`; None when the
        host's memory cannot be read (then nothing waits for it)."""
        available = meminfo.available_mb()
        return None if available is None else available - self.reserved_mb(conn, host)

    def refusal(self, conn: Connection, stage: StageConfig, host: str) -> Refusal | None:
        """None when an attempt of `stage` may start on `host` now, else why
        not, with the stages needing at least as much (the claim passes over
        their tasks too, instead of asking task by task)."""
        needed = needed_mb(stage)
        if needed == 0:
            return None
        free = self.free_mb(conn, host)
        if free is None or free >= needed:
            return None
        same = tuple(pair for pair, need in self._needs.items() if need >= needed)
        return Refusal(waiting_line(free, needed), same, _PASSED_OVER)
