"""Claims: move approved gates on, claim the next ready task and open its
attempt in one transaction, and halt a task whose stage the configuration
lost (`unknown_stage`) rather than run it."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Collection
from datetime import datetime

from sqlalchemy import Connection

from orchestrator.agents import budget as agent_budget
from orchestrator.config import PipelineConfig, Settings, StageConfig
from orchestrator.domain.pipeline import Event, State, Status, landing_instead, next_state
from orchestrator.ext.model import ACTOR, Claim, ClaimSearch, TickOptions, attempt_columns
from orchestrator.ext.registry import Registry
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, read_tx
from orchestrator.storage.schema import HEAD, current_revision
from orchestrator.testing import fault_point
from orchestrator.tick import branches
from orchestrator.tick.applier import Applier
from orchestrator.tick.claim_limits import ConfigWatch
from orchestrator.tick.host import HostIdentity
from orchestrator.tick.tick_run import TickRun
from orchestrator.tick.transactions import Transactions


class Claimer:
    """Gates and claims. A claim opens the attempt and marks the task running
    in one transaction, committed before any command runs.

    Touches `tasks`, `transitions`, `attempts` (a new open attempt) and the
    tick's row; reads the schema revision. Of the tick: `report` (claimed,
    advanced, halted, stopped_claiming) and `tick_id`."""

    def __init__(
        self,
        settings: Settings,
        tx: Transactions,
        tick: TickRun,
        me: HostIdentity,
        applier: Applier,
        config: ConfigWatch,
        registry: Registry | None = None,
    ) -> None:
        self.settings = settings
        self.tx = tx
        self.tick = tick
        self.me = me
        self.applier = applier
        self.config = config
        # The features' claim hooks (`refuse_claim`, `pipeline_of`, `after_claim`).
        self.registry = registry or Registry.empty()

    def advance_approved(self) -> None:
        approved = self.tx.retrying(lambda _again: self._approved())
        for task, reason in approved:
            if not branches.commit_approved(self.settings, task, reason, self.tick.warn):
                continue  # git failed: moved on by a later tick, never without its commit
            try:
                self.tx.retrying(functools.partial(self._advance, task))
            except repo.ConflictError:
                continue

    def _approved(self) -> list[tuple[repo.TaskSnapshot, str | None]]:
        """The approved tasks, each with its approval's reason (the commit it fixed)."""
        with read_tx(self.tx.engine) as conn:
            return [
                (task, repo.last_reason(conn, task.id, Event.APPROVE.value))
                for task in repo.tasks_with_status(conn, Status.APPROVED)
            ]

    def _advance(self, task: repo.TaskSnapshot, _again: bool) -> None:
        """Move one approved gate on; a retry whose first try committed
        finds the task no longer approved and does nothing."""
        with self.tx.write() as conn:
            current = repo.get_task_by_id(conn, task.id)
            if current is None or current.status is not Status.APPROVED:
                return
            if self.registry.leave_task(conn, current) is not None:
                return  # stays approved: a feature leaves it to another host or time
            now = db_now(conn)
            self.tx.ensure_tick(conn, now)
            pipeline = _pipeline(self, conn, current)
            if pipeline is None or pipeline.stage(current.stage) is None:
                self.applier.halt_unknown(conn, current, now)
                return
            to = next_state(current.state, Event.ADVANCE, pipeline.stage_names)
            to = landing_instead(current.state, to, pipeline.landing.lands)
            repo.apply_transition(
                conn,
                current,
                Event.ADVANCE,
                to,
                now=now,
                actor=ACTOR,
                reason="gate approved",
                next_hint="",
                hint_source=None,
            )
            fault_point("inside_advance_tx")
            self.tick.report.advanced += 1
        fault_point("after_advance_commit")
        self.tick.say(f"{task.slug}: {task.stage}:approved -> {to}")

    def may_claim(self, options: TickOptions, claims: int, started: float) -> bool:
        if options.max_tasks is not None and claims >= options.max_tasks:
            return False
        if options.max_seconds is not None and time.monotonic() - started >= options.max_seconds:
            return False
        if self.config.changed():
            self.tick.report.stopped_claiming = "the configuration changed"
            return False
        return self.tick.report.stopped_claiming is None

    def claim(
        self, exclude: Collection[int], only: str | None, token: str, again: bool = False
    ) -> Claim | None:
        with self.tx.write() as conn:
            claim = self.claim_by_token(conn, token) if again else None
            if claim is None:
                claim = self.claim_in(conn, exclude, only, token)
            if claim is not None:
                fault_point("inside_claim_tx")
        if claim is not None:
            fault_point("after_claim_commit")
            self.tick.report.claimed += 1
        return claim

    def claim_in(
        self, conn: Connection, exclude: Collection[int], only: str | None, token: str
    ) -> Claim | None:
        """Claim the next task in `conn`'s transaction, halting the ones whose
        stage the config lost; None when there is none, or the schema moved."""
        if current_revision(conn) != HEAD:
            self.tick.report.stopped_claiming = "the schema revision changed"
            return None
        # A feature's own claim first (a running round's next slot).
        search = ClaimSearch(exclude, only, token, self.registry.refuse_claim)
        if (first := self.registry.claim_first(conn, search)) is not None:
            self.registry.after_claim(conn, first, db_now(conn))
            return first
        refused: list[tuple[str, str]] = []  # (pipeline, stage) a feature said no to
        left: set[int] = set()  # tasks a feature leaves (`leave_task`)
        while True:
            task = repo.find_claimable(
                conn,
                host=self.me.host,
                any_host=self.settings.affinity == "any",
                exclude=exclude if not left else {*exclude, *left},
                slug=only,
                skip_stages=refused,
            )
            if task is None:
                return None
            if self.registry.leave_task(conn, task) is not None:
                left.add(task.id)
                continue
            now = db_now(conn)
            self.tx.ensure_tick(conn, now)
            pipeline = _pipeline(self, conn, task)
            stage = None if pipeline is None else pipeline.stage(task.stage)
            if pipeline is None or stage is None:
                self.applier.halt_unknown(conn, task, now)
                fault_point("after_halt_unknown")
                continue
            over = agent_budget.halt_if_over(
                conn, task, stage, now=now, actor=ACTOR, pipeline=pipeline
            )
            if over is not None:
                with self.tick.lock:
                    self.tick.report.halted += 1
                self.tx.say_after_commit(f"{task.slug}: halted (budget: {over.describe()})")
                continue
            refusal = self.registry.refuse_claim(conn, stage, now)
            if refusal is not None:
                refused.extend(refusal.stages)
                continue
            claim = self._open_attempt(conn, task, pipeline, stage, now, token)
            self.registry.after_claim(conn, claim, now)
            return claim

    def claim_by_token(self, conn: Connection, token: str) -> Claim | None:
        """The claim a first try made and committed though its answer was
        lost: the open attempt holding `token`, rebuilt; None when that try
        rolled back. A task that moved since (halted) gets a version no row
        has, so the attempt's fence check stops it at once."""
        attempt = repo.attempt_with_token(conn, token)
        if attempt is None or attempt.finished_at is not None:
            return None
        task = repo.get_task_by_id(conn, attempt.task_id)
        pipeline = None if task is None else _pipeline(self, conn, task)
        stage = None if pipeline is None else pipeline.stage(attempt.stage)
        if task is None or pipeline is None or stage is None:
            return None  # the next tick recovers it
        if task.status is not Status.RUNNING or task.stage != attempt.stage:
            task = dataclasses.replace(task, version=-1)
        prev = next(
            (
                a
                for a in repo.attempts_of(conn, task.id, attempt.stage)
                if a.number == attempt.number - 1
            ),
            None,
        )
        with self.tick.lock:
            if self.tick.tick_id is None:  # made by that try, forgotten by `Transactions.write`
                self.tick.tick_id = attempt.tick_id
        claim = Claim(
            task=task,
            pipeline=pipeline,
            stage=stage,
            attempt_id=attempt.id,
            number=attempt.number,
            token=token,
            hint=attempt.hint,
            prev_outcome=(prev.outcome or "") if prev else "",
            prev_score="" if prev is None or prev.score is None else repr(prev.score),
        )
        slot = self.registry.slot_of(conn, attempt.id)
        return claim if slot is None else slot.on(claim)

    def _open_attempt(
        self,
        conn: Connection,
        task: repo.TaskSnapshot,
        pipeline: PipelineConfig,
        stage: StageConfig,
        now: datetime,
        token: str,
    ) -> Claim:
        prev = repo.last_attempt(conn, task.id, task.stage)
        number = 1 if prev is None else prev.number + 1
        columns = attempt_columns(
            self.me,
            task,
            stage,
            number=number,
            token=token,
            lease=repo.lease_expiry(now, self.settings.lease_seconds),
            now=now,
            tick_id=self.tick.tick_id,
        )
        # A feature may open it as its own (a round's first slot).
        opened = self.registry.open_attempt(conn, task, stage, columns)
        attempt_id, slot = (
            opened if opened is not None else (repo.open_attempt(conn, **columns), None)
        )
        claimed = repo.apply_transition(
            conn,
            task,
            Event.CLAIM,
            State(task.stage, Status.RUNNING),
            now=now,
            actor=ACTOR,
            reason=f"attempt {number}",
            attempt_id=attempt_id,
            host=self.me.host if task.host is None else None,
        )
        claim = Claim(
            task=claimed,
            pipeline=pipeline,
            stage=stage,
            attempt_id=attempt_id,
            number=number,
            token=token,
            hint=task.next_hint,
            prev_outcome=(prev.outcome or "") if prev else "",
            prev_score="" if prev is None or prev.score is None else repr(prev.score),
        )
        return claim if slot is None else slot.on(claim)


def _pipeline(claimer: Claimer, conn: Connection, task: repo.TaskSnapshot) -> PipelineConfig | None:
    """The pipeline the task runs: the configured one, unless a feature
    answers another (`pipeline_of`, in `conn`'s transaction)."""
    configured = claimer.settings.pipeline(task.pipeline)
    return claimer.registry.pipeline_of(conn, task, configured)
