"""Recovery: close the attempts whose tick died (killing what they started
first), recording the result such a tick kept, else closing them `crashed`."""

from __future__ import annotations

import dataclasses
import functools
from datetime import datetime
from typing import Any

from orchestrator.config import Settings
from orchestrator.domain.decide import Outcome, decide
from orchestrator.domain.pipeline import Status
from orchestrator.ext.lookups import stage_names, stage_of, stage_policy
from orchestrator.ext.model import LEASE_EXPIRED, Claim
from orchestrator.ext.registry import Registry
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, is_sqlite, read_tx
from orchestrator.storage.repo import outbox
from orchestrator.testing import fault_point
from orchestrator.tick.applier import Applier
from orchestrator.tick.dead_ticks import close_dead_ticks
from orchestrator.tick.host import HostIdentity
from orchestrator.tick.kept import forget_kept, kept_run
from orchestrator.tick.lookups import attempt_folder
from orchestrator.tick.orphan_traces import ALIVE, OrphanTraces
from orchestrator.tick.recording import Recorder
from orchestrator.tick.tick_run import TickRun
from orchestrator.tick.transactions import Transactions


class Recovery:
    """Recovery. An attempt is an orphan by its lease, or, on its own host, by
    its tick's pid, start time, boot and pid namespace. On SQLite (one host)
    a tick seen alive keeps its attempts whatever the lease says: the lease
    was written by one process's clock and would be read by another's.

    Touches `attempts` (closed `crashed`, `late_result`), `tasks` and
    `transitions` through the applier (or the recorder, for a kept result),
    the outbox (`on_crash`) and the tick's row; kills process groups on
    this host; reads and removes kept results. Of the tick: `report`
    (recovered) and `tick_id`, to know its own attempts."""

    def __init__(
        self,
        settings: Settings,
        tx: Transactions,
        tick: TickRun,
        me: HostIdentity,
        recorder: Recorder,
        applier: Applier,
        registry: Registry | None = None,
    ) -> None:
        self.settings = settings
        self.tx = tx
        self.tick = tick
        self.me = me
        self.recorder = recorder
        self.applier = applier
        # The features' `slot_of` and `decide_round` (a round's crashed slot).
        self.registry = registry or Registry.empty()
        self.traces = OrphanTraces(settings, tx, me, self.registry)

    def orphaned(self, attempt: repo.AttemptSnapshot, now: datetime) -> str | None:
        verdict = self.traces.by_process(attempt, self.tick.tick_id)
        if verdict == ALIVE and is_sqlite(self.tx.engine):
            # SQLite is one host: a holder seen alive keeps its attempt,
            # whatever the clocks of two processes say about its lease.
            return None
        if attempt.lease_expires_at < now:
            return LEASE_EXPIRED
        return None if verdict in (ALIVE, None) else verdict

    def recover(self) -> None:
        """Close attempts whose tick died, killing their process groups first.

        Killing happens outside any transaction (it may wait a grace period);
        the close is fenced on the lease token, so a tick that came back to
        life in between keeps its attempt and this one changes nothing.
        """
        self.tx.retrying(
            lambda _again: close_dead_ticks(
                self.tx.engine, host=self.me.host, pid=self.me.pid, tick_id=self.tick.tick_id
            )
        )
        for attempt, why, slug in self.tx.retrying(lambda _again: self._orphans()):
            self.traces.kill(attempt, slug)
            fault_point("before_recover_tx")
            try:
                self._recover_one(attempt, why, slug)
            except repo.ConflictError:
                continue
        # What a dead tick left for the features to finish (a decided round
        # not yet on its branch), the closes above included.
        self.registry.after_recovery()

    def _orphans(self) -> list[tuple[repo.AttemptSnapshot, str, str | None]]:
        with read_tx(self.tx.engine) as conn:
            now = db_now(conn)
            found = []
            for attempt in repo.unfinished_attempts(conn):
                why = self.orphaned(attempt, now)
                if why is not None:
                    task = repo.get_task_by_id(conn, attempt.task_id)
                    found.append((attempt, why, task.slug if task else None))
        return found

    def _recover_one(self, attempt: repo.AttemptSnapshot, why: str, slug: str | None) -> None:
        """Record the result its tick kept when the database failed it (as if
        that tick had recorded it), else close the attempt `crashed`."""
        kept = self.traces.kept_result(attempt, slug)
        if kept is not None:
            try:
                if self._record_kept(attempt, kept):
                    return
            except repo.ConflictError:
                raise
            except Exception as exc:  # it failed its tick too: closed as a crash
                self.tick.error(f"{slug}: recording the result attempt {attempt.number} kept", exc)
        usage = self.traces.spent(attempt, slug)
        # What a command reported spending says it ran, noted or not.
        started = kept is not None or bool(usage) or not self.traces.never_started(attempt, slug)
        if not started:
            why += "; none of its commands had started"
        self.tx.retrying(
            lambda _again: self._close_crashed(attempt, why, kept, usage, started=started)
        )

    def _record_kept(self, attempt: repo.AttemptSnapshot, kept: dict[str, Any]) -> bool:
        """Record a kept result through `Recorder.record`, fenced as its own tick's
        record would have been: the attempt still open with its token, the
        task still at the version its claim gave it (else `interrupted`,
        the result in `late_result`). False when it cannot be (the task is
        gone, the config lost its stage): then it is closed like a crash."""
        version = kept.get("version")
        task = self.tx.retrying(lambda _again: self.traces.task(attempt.task_id))
        pipeline = None if task is None else self.settings.pipeline(task.pipeline)
        stage = None if pipeline is None else pipeline.stage(attempt.stage)
        if task is None or pipeline is None or stage is None or not isinstance(version, int):
            return False
        claim = Claim(
            task=dataclasses.replace(task, version=version),
            pipeline=pipeline,
            stage=stage,
            attempt_id=attempt.id,
            number=attempt.number,
            token=attempt.lease_token,
            hint=attempt.hint,
            prev_outcome="",
            prev_score="",
        )
        slot = self.tx.retrying(lambda _again: self.traces.slot_of(attempt.id))
        claim = claim if slot is None else slot.on(claim)
        self.tx.retrying(lambda _again: self.tx.open_tick())
        self.tx.retrying(functools.partial(self.recorder.record, claim, kept_run(kept), None))
        with self.tick.lock:
            self.tick.report.recovered += 1
        folder = attempt_folder(self.settings, task.slug, attempt.stage, attempt.number)
        forget_kept(folder)  # recorded: nothing is kept any more
        return True

    def _close_crashed(
        self,
        attempt: repo.AttemptSnapshot,
        why: str,
        kept: dict[str, Any] | None = None,
        usage: dict[str, Any] | None = None,
        *,
        started: bool = True,
    ) -> None:
        outcome = orphan_outcome(kept, started=started)
        if kept is not None:
            why += "; the result its tick could not record is kept in late_result"
        with self.tx.write() as conn:
            now = db_now(conn)
            in_round = self.registry.slot_of(conn, attempt.id)
            if in_round is not None:
                repo.lock_task(conn, attempt.task_id)  # one close at a time sees the round full
            closed = repo.close_attempt(
                conn,
                attempt.id,
                attempt.lease_token,
                # Judged by its lease: only if still expired now. A thawed
                # owner that renewed meanwhile keeps its attempt.
                expired_at=now if why == LEASE_EXPIRED else None,
                outcome=outcome.value,
                error=f"{outcome.value}: {why}",
                finished_at=now,
                **(usage or {}),
            )
            if not closed:
                return
            if kept is not None:
                repo.record_late_result(conn, attempt.id, kept)
            self.tx.ensure_tick(conn, now)
            self.tick.report.recovered += 1
            task = repo.get_task_by_id(conn, attempt.task_id)
            outbox.on_crash(conn, task, attempt, now=now, why=why, outcome=outcome.value)
            if task is None or task.status is not Status.RUNNING or task.stage != attempt.stage:
                return  # halted or cancelled meanwhile: the attempt just ends
            if in_round is not None:
                end = self.registry.decide_round(conn, task, in_round, now)
                self.tx.say_after_commit(
                    f"{task.slug}: attempt {attempt.number} at {attempt.stage} "
                    f"{outcome.value} ({why}) " + end.tail
                )
                fault_point("inside_recover_tx")
                return
            stage = stage_of(self.settings, task)
            if stage is None:
                self.applier.halt_unknown(conn, task, now)
                return
            decision = decide(
                task.stage,
                stage_names(self.settings, task),
                stage_policy(self.settings, stage),
                repo.run_history(conn, task, excluding=attempt.id),
                outcome,
            )
            self.applier.apply(conn, task, decision, attempt.id, now)
            fault_point("inside_recover_tx")
        fault_point("after_recover_commit")
        self.tick.say(
            f"{task.slug}: attempt {attempt.number} at {attempt.stage} {outcome.value} ({why})"
        )


def orphan_outcome(kept: dict[str, Any] | None, *, started: bool) -> Outcome:
    """How an orphan is closed. Nothing of the task ran (`started` False):
    the host's fault. Its tick kept a result because the database failed
    it: the database's. Either counts toward nothing; else it is a crash."""
    if not started:
        return Outcome.HOST_ERROR
    if kept is not None and kept.get("database") is True:
        return Outcome.DATABASE_ERROR
    return Outcome.CRASHED
