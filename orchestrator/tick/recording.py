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
from orchestrator.domain.decide import Decision, Outcome, decide
from orchestrator.domain.pipeline import Status
from orchestrator.domain.slug import slug_problem
from orchestrator.domain.text import clean_text, one_line
from orchestrator.storage import repo
from orchestrator.storage.db import connection_lost, db_now, savepoint
from orchestrator.testing import fault_point
from orchestrator.tick.claims import Claims
from orchestrator.tick.model import ACTOR, AttemptRun, Chain, Claim, Ended


class Recording(Claims):
    """Closing an attempt. Every close is a compare-and-set on the lease token
    (and, for a result to count, the task's version): a stale result is kept
    aside in `late_result`, never applied."""

    def _record(
        self, claim: Claim, run: AttemptRun, chain: Chain | None = None, again: bool = False
    ) -> Ended:
        """Close the attempt and apply its decision; say whether the task is
        ready again (or, its result stale, may be: someone else moved it).
        With `chain`, the same transaction claims the next task. With
        `again` (a retry), first see whether the first try committed."""
        verdict = run.verdict
        fields: dict[str, Any] = {
            "outcome": run.outcome.value,
            "passed": None if verdict is None else verdict.passed,
            "score": None if verdict is None else verdict.score,
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
        with self._tick_lock:
            ident = self._processes.pop(
                self._state_dir(claim.task.slug, claim.stage.name, claim.number), None
            )
        if ident is not None:  # the last process the attempt started, for the record
            fields.update(pid=ident.pid, pgid=ident.pgid, proc_start=ident.start_time)
        columns = {("pass" if k == "passed" else k): v for k, v in fields.items()}
        following: Claim | None = None
        with self._write() as conn:
            now = db_now(conn)
            if again:
                done = self._recorded_before(conn, claim, run, chain)
                if done is not None:
                    return done
            task = repo.get_task_by_id(conn, claim.task.id)
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
                    self._count(Outcome.INTERRUPTED)
                return True, None
            decision = decide(
                task.stage,
                claim.pipeline.stage_names,
                self._policy(claim.stage),
                repo.run_history(conn, task, excluding=claim.attempt_id),
                run.outcome,
                verdict,
                run.workspace_changed,
            )
            if decision.plateau is not None:
                columns["plateau"] = json.dumps(decision.plateau.to_dict(), sort_keys=True)
            closed = repo.close_attempt(
                conn, claim.attempt_id, claim.token, **columns, finished_at=now
            )
            if not closed:  # recovered meanwhile: the result is kept, not counted
                repo.record_late_result(conn, claim.attempt_id, {**columns, "at": now.isoformat()})
                return True, None
            fault_point("inside_record_tx")
            self._apply(conn, task, decision, claim.attempt_id, now)
            if run.backoff_seconds is not None and decision.state.status is Status.READY:
                wait = run.backoff_seconds  # 0: no wait at all, not "until now"
                repo.set_backoff(conn, task.id, now + timedelta(seconds=wait) if wait else None)
            ready = decision.state.status is Status.READY
            if chain is not None:
                following = self._claim_next(conn, chain, claim.task.id if ready else None)
                if following is not None:
                    fault_point("inside_claim_tx")
        fault_point("after_record_commit")
        if following is not None:
            fault_point("after_claim_commit")
            self.report.claimed += 1
        try:
            self._count(run.outcome)
            score = "" if verdict is None else f" score {verdict.score:.2f}"
            self.say(
                f"{claim.task.slug}: {claim.stage.name} attempt {claim.number} "
                f"{run.outcome.value}{score}{_why(run)} -> {decision.state}"
                + (f" ({decision.halt_reason.value})" if decision.halt_reason else "")
            )
        except Exception as exc:  # e.g. stdout closed: the committed claim must still run
            self._error(f"{claim.task.slug}: reporting failed", exc)
        return ready, following

    def _usage_dir(self, claim: Claim) -> Path | None:
        """The folder whose files say what the attempt spent (never one of a bad slug)."""
        if slug_problem(claim.task.slug) is not None:
            return None
        return self._state_dir(claim.task.slug, claim.stage.name, claim.number)

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
        following = None if chain is None else self._claim_by_token(conn, chain.token)
        self._count(run.outcome)
        if following is not None:
            self.report.claimed += 1
        self._say_after_commit(
            f"{claim.task.slug}: {claim.stage.name} attempt {claim.number} "
            f"{attempt.outcome} (recorded before the connection was lost)"
        )
        return task is not None and task.status is Status.READY, following

    def _release(self, claim: Claim) -> None:
        """Close a claim whose attempt never started (the tick is stopping)."""
        try:
            self._retrying(
                functools.partial(
                    self._record,
                    claim,
                    AttemptRun(Outcome.INTERRUPTED, error="the tick stopped before it started"),
                    None,
                )
            )
        except Exception as exc:
            self._error(f"{claim.task.slug}: releasing the claim", exc)

    def _claim_next(self, conn: Connection, chain: Chain, ready_again: int | None) -> Claim | None:
        """The next claim, in the transaction recording the last attempt
        (whose task, `ready_again`, waits out `retry_interval` like the rest)."""
        if self.stop.is_set() or not self._may_claim(chain.options, chain.claims, chain.started):
            return None
        exclude = chain.cooldown.waiting()
        if ready_again is not None and self.settings.retry_interval > 0:
            exclude.add(ready_again)
        lines = list(getattr(self._local, "lines", None) or [])
        halted = self.report.halted
        try:
            # In a savepoint: a claim that fails must not take the record
            # with it. The loop then claims again on its own.
            with savepoint(conn):
                return self._claim_in(conn, exclude, chain.options.task, chain.token)
        except Exception as exc:
            if connection_lost(exc):
                raise  # the record went with it: retried whole (`_retrying`)
            # What the rolled-back claim did is undone: forget its lines too.
            self._local.lines[:] = lines
            with self._tick_lock:
                self.report.halted = halted
            self._error("claiming the next task (the loop claims again)", exc)
            return None

    def _apply(
        self,
        conn: Connection,
        task: repo.TaskSnapshot,
        decision: Decision,
        attempt_id: int,
        now: datetime,
    ) -> None:
        repo.apply_transition(
            conn,
            task,
            decision.event,
            decision.state,
            now=now,
            actor=ACTOR,
            reason=decision.reason,
            attempt_id=attempt_id,
            halt_reason=None if decision.halt_reason is None else decision.halt_reason.value,
            next_hint=decision.next_hint,
            hint_source="verdict",
        )
        if decision.halt_reason is not None:
            with self._tick_lock:
                self.report.halted += 1


def _why(run: AttemptRun) -> str:
    """A failed attempt's reason, for its line in the log: cron's log is
    often all a person reads, and "worker_error" alone sends them to `explain`."""
    if not run.error or run.outcome is Outcome.PASSED:
        return ""
    return f" ({one_line(run.error)})"
