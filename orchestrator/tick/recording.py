"""Recording: close an attempt, ask `decide` what follows, apply it, in one
transaction fenced by the task's version and the attempt's lease token; with
`--jobs 1` the same transaction claims the next task (`Chain`)."""

from __future__ import annotations

import functools
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection

from orchestrator.agents import runtime as agent_runtime
from orchestrator.config import Settings
from orchestrator.domain.decide import Decision, Outcome, decide
from orchestrator.domain.pipeline import Event, State, Status
from orchestrator.domain.slug import slug_problem
from orchestrator.domain.text import clean_text, one_line
from orchestrator.ext.lookups import stage_policy
from orchestrator.ext.model import AttemptRun, Chain, Claim, Ended
from orchestrator.ext.registry import Registry
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, savepoint
from orchestrator.storage.driver_errors import connection_lost
from orchestrator.testing import fault_point
from orchestrator.tick.applier import Applier
from orchestrator.tick.claims import Claimer
from orchestrator.tick.lookups import attempt_folder
from orchestrator.tick.notes import AttemptNotes
from orchestrator.tick.tick_run import TickRun
from orchestrator.tick.transactions import Transactions


class Recorder:
    """Closing an attempt. Every close is a compare-and-set on the lease token
    (and, for a result to count, the task's version): a stale result is kept
    aside in `late_result`, never applied.

    Touches `attempts` (the close, `late_result`, a backoff), and through the
    applier `tasks` and `transitions`; with a `Chain`, the claimer's tables
    too. Reads the attempt's usage files. Of the tick: `report` (outcomes,
    claimed) and the process notes (`AttemptNotes`)."""

    def __init__(
        self,
        settings: Settings,
        tx: Transactions,
        tick: TickRun,
        claimer: Claimer,
        applier: Applier,
        notes: AttemptNotes,
        registry: Registry | None = None,
    ) -> None:
        self.settings = settings
        self.tx = tx
        self.tick = tick
        self.claimer = claimer
        self.applier = applier
        self.notes = notes
        self.registry = registry or Registry.empty()  # `after_record` (a pool's pause)

    def record(
        self, claim: Claim, run: AttemptRun, chain: Chain | None = None, again: bool = False
    ) -> Ended:
        """Close the attempt and apply its decision; say whether the task is
        ready again (or, its result stale, may be: someone else moved it).
        With `chain`, the same transaction claims the next task. With
        `again` (a retry), first see whether the first try committed."""
        verdict = run.verdict
        columns, usage = self._columns(claim, run)
        following: Claim | None = None
        with self.tx.write() as conn:
            now = db_now(conn)
            if again:
                done = self._recorded_before(conn, claim, run, chain)
                if done is not None:
                    return done
            task = self._task(conn, claim)
            fenced = task is not None and task.version == claim.task.version
            if not fenced or task is None:
                # Halted or cancelled while it ran: whatever the worker and
                # verifier said, the attempt was interrupted. Its result is
                # kept aside (`late_result`), never as a score of the run.
                closed = repo.close_attempt(
                    conn,
                    claim.attempt_id,
                    claim.token,
                    outcome=Outcome.INTERRUPTED.value,
                    worker_exit=run.worker_exit,
                    verifier_exit=run.verifier_exit,
                    finished_at=now,
                    error="the task changed while the attempt ran; result not applied",
                    **usage,  # spent all the same: it counts toward the budget
                )
                repo.record_late_result(conn, claim.attempt_id, {**columns, "at": now.isoformat()})
                if closed:  # else another tick closed it: its result is only kept
                    self.tick.count(Outcome.INTERRUPTED)
                return True, None
            if claim.round is not None:
                return self._record_member(conn, claim, task, columns, chain, now, run)
            decision = decide(
                task.stage,
                claim.pipeline.stage_names,
                stage_policy(self.settings, claim.stage),
                repo.run_history(conn, task, excluding=claim.attempt_id),
                run.outcome,
                verdict,
                run.workspace_changed,
                now=now,
            )
            wait = _recorded_as(decision, run, columns)
            if decision.plateau is not None:
                columns["plateau"] = json.dumps(decision.plateau.to_dict(), sort_keys=True)
            closed = repo.close_attempt(
                conn, claim.attempt_id, claim.token, **columns, finished_at=now
            )
            if not closed:  # recovered meanwhile: the result is kept, not counted
                repo.record_late_result(conn, claim.attempt_id, {**columns, "at": now.isoformat()})
                return True, None
            fault_point("inside_record_tx")
            written = self.applier.apply(conn, task, decision, claim.attempt_id, now)
            if decision.event is Event.AWAIT_APPROVAL:
                written = self._open_gate(conn, claim, now) or written
            if wait is not None and decision.state.status is Status.READY:
                # A backoff's or a pending verdict's recheck; 0: no wait at all, not "until now"
                repo.set_backoff(conn, task.id, now + timedelta(seconds=wait) if wait else None)
            self.registry.after_record(conn, claim, run, now)
            ready = decision.state.status is Status.READY
            if chain is not None:
                following = self._claim_next(conn, chain, claim.task.id if ready else None)
                if following is not None:
                    fault_point("inside_claim_tx")
        fault_point("after_record_commit")
        if following is not None:
            fault_point("after_claim_commit")
            self.tick.report.claimed += 1
        try:
            self.tick.count(run.outcome)
            score = "" if verdict is None else f" score {verdict.score:.2f}"
            self.tick.say(
                f"{claim.task.slug}: {claim.stage.name} attempt {claim.number} "
                f"{run.outcome.value}{score}{_why(run)} -> {written}"
                + (f" ({decision.halt_reason.value})" if decision.halt_reason else "")
            )
        except Exception as exc:  # e.g. stdout closed: the committed claim must still run
            self.tick.error(f"{claim.task.slug}: reporting failed", exc)
        return ready, following

    def _columns(self, claim: Claim, run: AttemptRun) -> tuple[dict[str, Any], dict[str, Any]]:
        """The attempt's row as `close_attempt` writes it, and the usage part
        alone (an interrupted attempt is charged it all the same)."""
        verdict = run.verdict
        judged = None if verdict is None or verdict.pending else verdict  # a wait has no score
        fields: dict[str, Any] = {
            "outcome": run.outcome.value,
            "passed": None if judged is None else judged.passed,
            "score": None if judged is None else judged.score,
            "reasons": None if verdict is None else json.dumps(list(verdict.reasons)),
            "next_hint": None if verdict is None else verdict.next_hint,
            "error": None if run.error is None else clean_text(run.error, 4096),
            "worker_exit": run.worker_exit,
            "verifier_exit": run.verifier_exit,
            "workspace_hash": run.workspace_hash,
            "commit_sha": run.commit_sha,
            "workspace_changed": run.workspace_changed,
        }
        usage = agent_runtime.attempt_usage(self._usage_dir(claim), claim.stage)
        fields.update(usage)
        ident = self.notes.take_process(
            attempt_folder(self.settings, claim.task.slug, claim.stage.name, claim.number)
        )
        if ident is not None:  # the last process the attempt started, for the record
            fields.update(pid=ident.pid, pgid=ident.pgid, proc_start=ident.start_time)
        columns = {("pass" if k == "passed" else k): v for k, v in fields.items()}
        return columns, usage

    def _task(self, conn: Connection, claim: Claim) -> repo.TaskSnapshot | None:
        if claim.round is not None:  # one close of a round's at a time sees it full
            repo.lock_task(conn, claim.task.id)
        return repo.get_task_by_id(conn, claim.task.id)

    def _record_member(
        self,
        conn: Connection,
        claim: Claim,
        task: repo.TaskSnapshot,
        columns: dict[str, Any],
        chain: Chain | None,
        now: datetime,
        run: AttemptRun,
    ) -> Ended:
        """The close of one attempt of a round, inside `record`'s
        transaction (the task's row held): no `decide` of its own; the
        feature that opened the round decides it when this was its last
        slot (`TickHooks.decide_round`)."""
        slot = claim.slot
        assert slot is not None
        closed = repo.close_attempt(conn, claim.attempt_id, claim.token, **columns, finished_at=now)
        if not closed:  # recovered meanwhile: the result is kept, not counted
            repo.record_late_result(conn, claim.attempt_id, {**columns, "at": now.isoformat()})
            return True, None
        fault_point("inside_record_tx")
        self.registry.after_record(conn, claim, run, now)
        end = self.registry.decide_round(conn, task, slot, now)
        ready = end.decision is not None and end.decision.state.status is Status.READY
        following: Claim | None = None
        if chain is not None:
            following = self._claim_next(conn, chain, claim.task.id if ready else None)
        self.tx.say_after_commit(
            f"{claim.task.slug}: {claim.stage.name} attempt {claim.number} "
            f"{run.outcome.value}"
            + ("" if run.verdict is None else f" score {run.verdict.score:.2f}")
            + f"{_why(run)} "
            + ("" if end.state is None else f"-> {end.state} ")
            + end.tail
        )
        self.tick.count(run.outcome)
        if following is not None:
            self.tick.report.claimed += 1
        return ready, following

    def _open_gate(self, conn: Connection, claim: Claim, now: datetime) -> State | None:
        """A feature's opening of the gate the verdict just reached, in the
        record's transaction; None: it waits for a person."""
        reason = self.registry.open_gate(conn, claim, now)
        task = None if reason is None else repo.get_task_by_id(conn, claim.task.id)
        if reason is None or task is None:
            return None
        return self.applier.open_gate(conn, task, reason, now)

    def _usage_dir(self, claim: Claim) -> Path | None:
        """The folder whose files say what the attempt spent (never one of a bad slug)."""
        if slug_problem(claim.task.slug) is not None:
            return None
        return attempt_folder(self.settings, claim.task.slug, claim.stage.name, claim.number)

    def _recorded_before(
        self, conn: Connection, claim: Claim, run: AttemptRun, chain: Chain | None
    ) -> Ended | None:
        """A retried record: whether its first try committed before the
        answer was lost (the attempt is closed), and then what that try
        did, so nothing is applied twice. None: it rolled back, record now."""
        attempt = repo.attempt_with_token(conn, claim.token)
        if attempt is None or attempt.finished_at is None:
            return None
        if attempt.outcome == Outcome.CRASHED.value and run.outcome is not Outcome.CRASHED:
            # Closed, but not by us: another host recovered it meanwhile. Our
            # result is kept aside, as when the fence is lost without a retry.
            verdict = run.verdict
            repo.record_late_result(
                conn,
                claim.attempt_id,
                {
                    "outcome": run.outcome.value,
                    "pass": None if verdict is None else verdict.passed,
                    "score": None if verdict is None else verdict.score,
                    "next_hint": None if verdict is None else verdict.next_hint,
                    "error": run.error,
                    "at": db_now(conn).isoformat(),
                },
            )
            return True, None
        task = repo.get_task_by_id(conn, claim.task.id)
        following = None if chain is None else self.claimer.claim_by_token(conn, chain.token)
        self.tick.count(run.outcome)
        if following is not None:
            self.tick.report.claimed += 1
        self.tx.say_after_commit(
            f"{claim.task.slug}: {claim.stage.name} attempt {claim.number} "
            f"{attempt.outcome} (recorded before the connection was lost)"
        )
        return task is not None and task.status is Status.READY, following

    def release(self, claim: Claim) -> None:
        """Close a claim whose attempt never started (the tick is stopping)."""
        try:
            self.tx.retrying(
                functools.partial(
                    self.record,
                    claim,
                    AttemptRun(Outcome.INTERRUPTED, error="the tick stopped before it started"),
                    None,
                )
            )
        except Exception as exc:
            self.tick.error(f"{claim.task.slug}: releasing the claim", exc)

    def _claim_next(self, conn: Connection, chain: Chain, ready_again: int | None) -> Claim | None:
        """The next claim, in the transaction recording the last attempt
        (whose task, `ready_again`, waits out `retry_interval` like the rest)."""
        if self.tick.stop.is_set() or not self.claimer.may_claim(
            chain.options, chain.claims, chain.started
        ):
            return None
        exclude = chain.cooldown.waiting()
        if ready_again is not None and self.settings.retry_interval > 0:
            exclude.add(ready_again)
        lines = self.tx.pending_lines()
        halted = self.tick.report.halted
        try:
            # In a savepoint: a claim that fails must not take the record
            # with it. The loop then claims again on its own.
            with savepoint(conn):
                return self.claimer.claim_in(conn, exclude, chain.options.task, chain.token)
        except Exception as exc:
            if connection_lost(exc):
                raise  # the record went with it: retried whole (`Transactions.retrying`)
            # What the rolled-back claim did is undone: forget its lines too.
            self.tx.forget_lines(lines)
            with self.tick.lock:
                self.tick.report.halted = halted
            self.tick.error("claiming the next task (the loop claims again)", exc)
            return None


def _why(run: AttemptRun) -> str:
    """A failed attempt's reason, for its line in the log: cron's log is
    often all a person reads, and "worker_error" alone sends them to `explain`."""
    if not run.error or run.outcome is Outcome.PASSED:
        return ""
    return f" ({one_line(run.error)})"


def _recorded_as(decision: Decision, run: AttemptRun, columns: dict[str, Any]) -> float | None:
    """Apply an outcome `decide` chose over the attempt's own (a pending
    verdict past its `pending_timeout` is recorded failed, and waits no
    more); the wait before the task is claimed again, if any."""
    if decision.outcome is None:
        return run.backoff_seconds
    columns["outcome"] = decision.outcome.value
    columns["error"] = clean_text(decision.reason, 4096)
    run.outcome = decision.outcome
    return None
