"""The tick's side of `[pools.NAME]`: whether a claim may open one more of
the pool's attempts, and the pause a usage limit puts on the pool.

A claim of a pooled stage locks the pool's row (`store.py`) and,
in the claim's own transaction, checks: the pool is not paused, fewer than
`max_running` of its attempts are open on any host, and its attempts that
finished since UTC midnight recorded less than `max_usd_per_day`. On
PostgreSQL a refusal rolls back to a savepoint, so the lock is let go at
once and a claim never holds two pools' locks (no lock order to keep).

An attempt that met a usage limit (its agent's output, or `limit_reset` in
its usage file) is recorded `backoff` and pauses the pool until the reset,
or for an exponential wait bounded by the pool's `max_pause` when no reset
time was given; the pause is a row, so every host sees it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from orchestrator import safefs
from orchestrator.agents import limits
from orchestrator.agents import runtime as agent_runtime
from orchestrator.config import Settings, StageConfig
from orchestrator.domain.decide import Outcome
from orchestrator.domain.event_kinds import POOL_PAUSED, POOL_RESUMED
from orchestrator.ext.hooks import TickHooks
from orchestrator.ext.model import AttemptRun, Claim, Refusal
from orchestrator.features.pools import store as pool_rows
from orchestrator.features.pools.config import PoolConfig
from orchestrator.storage import repo
from orchestrator.storage.db import savepoint
from orchestrator.storage.repo import outbox

if TYPE_CHECKING:
    from orchestrator.ext.ports import Kernel

# Outcomes a usage limit turns into `backoff`: the attempt did not do its
# work because of the wall. A verdict read stands (the limit still pauses
# the pool); a stopped or crashed attempt is not the agent's to explain.
LIMITED = frozenset({Outcome.WORKER_ERROR, Outcome.VERIFIER_ERROR, Outcome.BACKOFF})
_CAPTURE_READ = 4 << 20  # the envelope is at the end; a limit's output is short


# How the dry run words the tasks a refusal passes over with the one asked.
_PASSED_OVER = "nor would the pool's other tasks"


def tick_hooks(kernel: Kernel) -> TickHooks:
    """The pools' points in a tick: the cap and pause checked in the claim's
    transaction (and read-only by the dry run), the usage limit read after
    the attempt ran, the pause written in the record's transaction."""
    gate = PoolGate(kernel.settings)

    def refuse_claim(conn: Connection, stage: StageConfig, now: datetime) -> Refusal | None:
        if stage.pool is None:
            return None
        reason = gate.refusal(conn, stage, now)
        return None if reason is None else Refusal(reason, gate.members(stage.pool), _PASSED_OVER)

    def would_refuse(conn: Connection, stage: StageConfig, now: datetime) -> Refusal | None:
        reason = gate.would_refuse(conn, stage, now)
        if reason is None:
            return None
        return Refusal(reason, gate.members(stage.pool or ""), _PASSED_OVER)

    def after_run(claim: Claim, run: AttemptRun, folder: Path) -> None:
        note_limit(claim, run, folder, datetime.now(UTC))

    def after_record(conn: Connection, claim: Claim, run: AttemptRun, now: datetime) -> None:
        paused = gate.after_attempt(conn, claim, run, now)
        if paused is not None:
            kernel.tx.say_after_commit(f"{claim.task.slug}: {paused}")

    return TickHooks(
        refuse_claim=refuse_claim,
        would_refuse=would_refuse,
        after_run=after_run,
        after_record=after_record,
    )


class _Refused(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PoolGate:
    """Admits claims into pools and pauses pools at usage limits.

    Touches `pools` (its rows: the lock, the pause) and reads `attempts`
    (the running count, the spend); writes `events` (`pool_paused`,
    `pool_resumed`) through the outbox."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        members: dict[str, list[tuple[str, str]]] = {}
        for pipeline in settings.pipelines.values():
            for stage in pipeline.stages:
                if stage.pool is not None:
                    members.setdefault(stage.pool, []).append((pipeline.name, stage.name))
        self._members = {name: tuple(pairs) for name, pairs in members.items()}

    def members(self, pool: str) -> tuple[tuple[str, str], ...]:
        """(pipeline, stage) of every stage in `pool`: what a claim passes
        over once the pool refused it, without reading those tasks one by one."""
        return self._members.get(pool, ())

    def refusal(self, conn: Connection, stage: StageConfig, now: datetime) -> str | None:
        """None when the claim may open an attempt of `stage`, else why not.
        Admitted, the pool's row stays locked until the claim commits."""
        if stage.pool is None:
            return None
        pool = self.settings.pools[stage.pool]
        if conn.dialect.name != "postgresql":  # BEGIN IMMEDIATE: nothing to let go
            return self._check(conn, pool, now)
        try:
            with savepoint(conn):
                reason = self._check(conn, pool, now)
                if reason is not None:
                    raise _Refused(reason)  # rolls back: the row's lock goes with it
        except _Refused as refused:
            return refused.reason
        return None

    def would_refuse(self, conn: Connection, stage: StageConfig, now: datetime) -> str | None:
        """The refusal a claim of `stage` would meet now, read without a lock
        or a write (the dry run): the same rules as `refusal`, in one place."""
        if stage.pool is None:
            return None
        pool = self.settings.pools[stage.pool]
        row = pool_rows.get_pool(conn, pool.name) or pool_rows.PoolRow(pool.name)
        return self._reason(conn, pool, row, now)

    def _check(self, conn: Connection, pool: PoolConfig, now: datetime) -> str | None:
        row = pool_rows.lock_pool(conn, pool.name)
        if row.paused_until is not None and row.paused_until <= now:
            self._resume(conn, row, now, "the pause ended", reset_streak=False)
        return self._reason(conn, pool, row, now)

    def _reason(
        self, conn: Connection, pool: PoolConfig, row: pool_rows.PoolRow, now: datetime
    ) -> str | None:
        """Why the pool admits no attempt now, from its row as read; None
        when it admits one (a pause that has ended admits)."""
        if row.paused_until is not None and row.paused_until > now:
            return f"pool {pool.name} paused until {row.paused_until.isoformat()}"
        if pool.max_running is not None and pool_rows.running(conn, pool.name) >= pool.max_running:
            return f"pool {pool.name} has {pool.max_running} attempts running"
        if pool.max_usd_per_day is not None:
            spent = pool_rows.spent_since(conn, pool.name, pool_rows.day_start(now))
            if spent >= pool.max_usd_per_day:
                return (
                    f"pool {pool.name} spent ${spent:.4f} of ${pool.max_usd_per_day:.4f} "
                    "today (UTC)"
                )
        return None

    def _resume(
        self,
        conn: Connection,
        row: pool_rows.PoolRow,
        now: datetime,
        why: str,
        *,
        reset_streak: bool,
    ) -> None:
        pool_rows.end_pause(conn, row.name, reset_streak=reset_streak)
        task = None if row.paused_task_id is None else repo.get_task_by_id(conn, row.paused_task_id)
        if task is not None:  # an event names a task: the one whose limit paused the pool
            outbox.record(
                conn,
                POOL_RESUMED,
                task,
                now=now,
                attempt_id=None,
                facts={
                    "pool": row.name,
                    "reason": why,
                    "paused_until": None
                    if row.paused_until is None
                    else row.paused_until.isoformat(),
                },
            )

    def resume(self, conn: Connection, name: str, now: datetime, actor: str) -> bool:
        """`pool resume NAME`: end the pause now; False when it was not paused."""
        row = pool_rows.lock_pool(conn, name)
        if row.paused_until is None:
            return False
        self._resume(conn, row, now, f"resumed by {actor}", reset_streak=True)
        return True

    def after_attempt(
        self, conn: Connection, claim: Claim, run: AttemptRun, now: datetime
    ) -> str | None:
        """In the record's transaction: pause the pool for the limit the
        attempt met (a line to say), or reset the pause streak after one
        that did not meet any."""
        pool_name = claim.stage.pool
        if pool_name is None:
            return None
        limit = run.usage_limit
        if limit is None:
            pool_rows.reset_streak(conn, pool_name)
            return None
        pool = self.settings.pools[pool_name]
        row = pool_rows.lock_pool(conn, pool_name)
        streak = row.pause_streak
        if limit.reset is None:
            streak += 1
            until = now + timedelta(seconds=pool.pause_for(streak))
        else:
            until = max(limit.reset, now)
        if row.paused_until is not None and row.paused_until >= until:
            return None  # another attempt's limit already holds the pool longer
        pool_rows.pause(
            conn,
            pool_name,
            until=until,
            now=now,
            reason=limit.reason,
            task_id=claim.task.id,
            streak=streak,
        )
        outbox.record(
            conn,
            POOL_PAUSED,
            claim.task,
            now=now,
            attempt_id=claim.attempt_id,
            stage=claim.stage.name,
            facts={
                "pool": pool_name,
                "paused_until": until.isoformat(),
                "reason": limit.reason,
                "reset_known": limit.reset is not None,
            },
        )
        return f"pool {pool_name} paused until {until.isoformat()} ({limit.reason})"


def note_limit(claim: Claim, run: AttemptRun, folder: Path, now: datetime) -> None:
    """Read the usage limit the attempt met, if any, into `run`; an attempt
    the limit stopped becomes `backoff` (spends no attempt, the task waits
    with its pool). Only for a stage in a pool: elsewhere nothing pauses."""
    if claim.stage.pool is None:
        return
    limit = find_limit(claim.stage, folder, now)
    if limit is None:
        return
    run.usage_limit = limit
    if run.outcome in LIMITED:
        run.outcome = Outcome.BACKOFF
        run.backoff_seconds = None  # the pool waits, not the task
        note = f"usage limit: {limit.reason}"
        run.error = note if run.error is None else f"{run.error}; {note}"


def find_limit(stage: StageConfig, folder: Path, now: datetime) -> limits.UsageLimit | None:
    local = now.astimezone().tzinfo
    assert local is not None
    for name, fmt in (("worker", stage.output), ("verifier", stage.verifier_output)):
        try:
            raw = safefs.read_bytes(
                agent_runtime.usage_file(folder, name), agent_runtime.MAX_USAGE_FILE_BYTES + 1
            )
        except OSError:
            raw = b""
        if raw and len(raw) <= agent_runtime.MAX_USAGE_FILE_BYTES:
            found = limits.read_report_limit(raw, now)
            if found is not None:
                return found
        if fmt == "text":
            continue
        try:
            stdout = safefs.read_text(folder / f"{name}.out", _CAPTURE_READ)
        except OSError:
            continue
        found = limits.limit_in_output(fmt, stdout, now, local)
        if found is not None:
            return found
    return None
