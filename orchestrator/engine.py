"""The tick: recover, move approved gates on, claim, run, record.

The engine composes the pure core (what to do) with the adapters (storage,
runner): it gathers facts, asks `decide`, and writes the answer in one short
transaction. No transaction stays open while a worker or verifier runs; each
attempt is opened and committed first, then run, then closed in one
transaction fenced by the task's version and the attempt's lease token. A
result that lost its fence is kept as `late_result` and changes nothing.

Attempts run in a thread pool (`--jobs`); threads only wait on child
processes and do short transactions, so the GIL is no bottleneck. Signals are
the CLI's business: it sets `stop`, and every running attempt sees it within
a poll interval, stops its process group and is recorded `interrupted`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import hmac
import json
import os
import re
import shutil
import stat
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine

from orchestrator import context as attempt_context
from orchestrator import guards, runner
from orchestrator.config import PipelineConfig, Settings, StageConfig, config_fingerprint
from orchestrator.domain.decide import (
    Decision,
    HaltReason,
    Outcome,
    StagePolicy,
    decide,
    verdict_outcome,
)
from orchestrator.domain.pipeline import Event, State, Status, next_state
from orchestrator.domain.slug import slug_problem
from orchestrator.domain.text import clean_text
from orchestrator.domain.verdict import Verdict, parse_verdict, strict_pass_problem
from orchestrator.errors import ConnectionLostError, OrchestratorError, host_error
from orchestrator.storage import repo
from orchestrator.storage.db import (
    checkpoint,
    connection_lost,
    db_now,
    read_tx,
    savepoint,
    write_tx,
)
from orchestrator.storage.schema import HEAD, current_revision
from orchestrator.testing import fault_point

ACTOR = "tick"
LEASE_EXPIRED = "lease expired"
FENCE_CHECK_SECONDS = 5.0
ADVANCE_CHECK_SECONDS = 1.0
PROCESS_NOTE_AFTER = 0.01
# The exit status of a tick that swallowed an error to keep the other tasks
# going (EX_SOFTWARE), when the error carries no status of its own.
TICK_ERROR_STATUS = 70
KEPT_RESULT = "result.json"  # in the attempt's state folder: a result not recorded
# Bytes reserved for it when the attempt starts (blanks, which read as no
# result), so a result can still be kept once the disk has filled up.
KEPT_RESERVE = 16384
# Backoff between tries of a transaction whose connection was lost.
RECONNECT_FIRST_DELAY = 0.05
RECONNECT_MAX_DELAY = 2.0

_T = TypeVar("_T")


@dataclass(frozen=True)
class TickOptions:
    max_tasks: int | None = None
    max_seconds: float | None = None
    jobs: int = 1
    task: str | None = None
    dry_run: bool = False


@dataclass(frozen=True)
class TickError:
    """An error the tick survived (it went on with the other tasks), and the
    exit status it calls for: the error's own, or TICK_ERROR_STATUS."""

    message: str
    status: int


@dataclass
class TickReport:
    recovered: int = 0
    advanced: int = 0
    claimed: int = 0
    halted: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    errors: list[TickError] = field(default_factory=list)
    stopped_claiming: str | None = None
    host_fault: OrchestratorError | None = None  # the tick exits with its status

    @property
    def did_work(self) -> bool:
        return bool(self.recovered or self.advanced or self.claimed or self.halted)

    @property
    def exit_code(self) -> int:
        """0, or the status of the first error the tick survived."""
        return self.errors[0].status if self.errors else 0


@dataclass(frozen=True)
class Claim:
    task: repo.TaskSnapshot  # as it stands after the claim (running)
    pipeline: PipelineConfig
    stage: StageConfig
    attempt_id: int
    number: int
    token: str
    hint: str
    prev_outcome: str
    prev_score: str


@dataclass
class AttemptRun:
    """What running worker and verifier produced, before it is recorded."""

    outcome: Outcome
    verdict: Verdict | None = None
    error: str | None = None
    worker_exit: int | None = None
    verifier_exit: int | None = None
    fence_lost: bool = False
    workspace_hash: str | None = None  # runaway guards (`guards`)
    workspace_changed: bool | None = None
    backoff_seconds: float | None = None


@dataclass(frozen=True)
class _Chain:
    """`--jobs 1`: what the transaction recording an attempt needs to claim
    the next task too, saving a transaction (and its fsync) per attempt."""

    options: TickOptions
    claims: int  # claims made so far, this attempt's included
    started: float
    ended_at: dict[int, float]  # task id -> when its last attempt ended
    # Made before the record's first try, so a retry finds the claim a lost
    # commit made (`Ticker._recorded_before`).
    token: str = field(default_factory=lambda: uuid.uuid4().hex)


# What an attempt leaves the loop: whether its task may be ready again, and
# the next claim when the recording transaction made one (`_Chain`).
_Outcome = tuple[bool, Claim | None]


class Ticker:
    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        *,
        stop: threading.Event | None = None,
        say: Callable[[str], None] = lambda line: None,
        warn: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.stop = stop or threading.Event()
        self.say = say
        # Errors the tick survives: the CLI sends them to stderr, quiet or not.
        self.warn = warn
        # ORCHESTRATOR_HOST names this host when the hostname is not stable
        # (containers) or, in tests, to play several hosts on one machine.
        self.host = os.environ.get("ORCHESTRATOR_HOST") or runner.host_name()
        self.boot = runner.boot_id()
        # Stored with the boot id: pids are judged only within one namespace.
        self.pid_namespace = runner.pid_namespace()
        self.identity = f"{self.boot}/{self.pid_namespace}" if self.pid_namespace else self.boot
        self.pid = os.getpid()
        self.start_token = runner.process_start_time(self.pid)
        self.report = TickReport()
        self._tick_id: int | None = None
        self._tick_lock = threading.Lock()
        self._processes: dict[Path, runner.ProcessIdentity] = {}
        self._watch = guards.WorkspaceWatch()  # no-change guard (issue 15)
        # Per attempt folder: a capture file the disk could not take.
        self._capture_notes: dict[Path, str] = {}
        # Keyed by (pipeline, stage): two pipelines may both have `implement`
        # with different `env`, and a secret must reach only the one naming it.
        self._environments: dict[tuple[str, str], dict[str, str]] = {}
        self._config = _ConfigWatch(settings.config_path, settings.fingerprint)
        # Lines about what a write transaction did, said once it committed
        # (never while SQLite's write lock is held, never for a rollback).
        self._local = threading.local()
        # Set once the database stayed out of reach past `reconnect_seconds`:
        # every attempt stops, the tick claims nothing more and exits 69.
        self._db_down = threading.Event()

    # -- the tick ------------------------------------------------------------

    def tick(self, options: TickOptions = TickOptions()) -> TickReport:
        if options.dry_run:
            self._dry_run(options)
            return self.report
        status = TICK_ERROR_STATUS
        fault: OrchestratorError | None = None
        try:
            self.recover()
            self.advance_approved()
            self._claim_and_run(options)
            fault = self.report.host_fault
            status = self.report.exit_code if fault is None else fault.exit_code
        except OrchestratorError as exc:
            status = exc.exit_code
            raise
        finally:
            # The tick row is closed however the tick ends. When that fails
            # too, the error already on its way out (or said) is the one
            # that explains it.
            try:
                self._close_tick(exit_code=status)
            except Exception:
                if status == 0:
                    raise
        if self._tick_id is not None:
            checkpoint(self.engine)  # a tick that wrote leaves no WAL behind
        if fault is not None:
            raise fault
        return self.report

    def _error(self, where: str, exc: BaseException) -> None:
        """Note an error the tick survives: on stderr now, in the exit status later."""
        status = exc.exit_code if isinstance(exc, OrchestratorError) else TICK_ERROR_STATUS
        message = f"{where}: {exc}" if str(exc) else f"{where}: {type(exc).__name__}"
        with self._tick_lock:
            self.report.errors.append(TickError(message, status))
        try:
            self.warn(message)
        except Exception:  # stderr closed: the exit status still says it
            return

    def _retrying(self, fn: Callable[[bool], _T]) -> _T:
        """Run one transaction of the tick's, `fn(again)`, and run it again
        while the connection to the database is lost (a restart, a failover,
        a killed session), backing off, for at most `_reconnect_bound()`.

        Safe because every write is a compare-and-set on versions and lease
        tokens; but the first try may have committed before its answer was
        lost, so with `again` the body first looks for its own effect (the
        attempt closed, the claim's token in an open attempt) rather than
        write it twice. Past the bound the database is down for this tick:
        its attempts stop and it exits 69 (`_database_down`)."""
        again = False
        delay = RECONNECT_FIRST_DELAY
        deadline: float | None = None
        while True:
            try:
                return fn(again)
            except ConnectionLostError as exc:
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self._reconnect_bound()
                if self._db_down.is_set() or now + delay > deadline:
                    self._database_down(exc)
                    raise
            # Every pooled connection may be dead (a restart): start afresh.
            # Connections other threads hold are theirs to lose and retry.
            with contextlib.suppress(Exception):
                self.engine.dispose()
            time.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_DELAY)
            again = True

    def _reconnect_bound(self) -> float:
        """How long a transaction is retried: never past a lease, after which
        another host may have taken the attempt over anyway."""
        return min(self.settings.reconnect_seconds, self.settings.lease_seconds)

    def _database_down(self, exc: BaseException) -> None:
        """The database stayed out of reach past the bound: stop every
        attempt (`_FenceGuard`), claim nothing more, exit with its status."""
        error = (
            exc
            if isinstance(exc, OrchestratorError)
            else ConnectionLostError(f"cannot reach the database: {exc}")
        )
        with self._tick_lock:
            if self.report.host_fault is None:
                self.report.host_fault = error
            if self.report.stopped_claiming is None:
                self.report.stopped_claiming = str(error)
        self._db_down.set()

    def _ensure_tick(self, conn: Connection, now: datetime) -> int:
        with self._tick_lock:
            if self._tick_id is None:
                self._tick_id = repo.open_tick(conn, host=self.host, pid=self.pid, now=now)
            return self._tick_id

    def _close_tick(self, exit_code: int) -> None:
        if self._tick_id is None:
            return  # an idle tick writes nothing (cron runs it 1,440 times a day)
        self._retrying(lambda _again: self._close_tick_tx(exit_code))

    def _close_tick_tx(self, exit_code: int) -> None:
        assert self._tick_id is not None
        with self._write() as conn:
            repo.close_tick(
                conn,
                self._tick_id,
                now=db_now(conn),
                claimed=self.report.claimed,
                recovered=self.report.recovered,
                advanced=self.report.advanced,
                exit_code=exit_code,
            )
            fault_point("inside_close_tick_tx")

    def finish(self, exit_code: int) -> None:
        """Record the tick's end when it was stopped by a signal."""
        self._close_tick(exit_code)

    # -- 1. recovery -------------------------------------------------------------

    def _orphaned(self, attempt: repo.AttemptSnapshot, now: datetime) -> str | None:
        if attempt.lease_expires_at < now:
            return LEASE_EXPIRED
        if attempt.host != self.host:
            return None
        boot, _, namespace = attempt.boot_id.partition("/")
        if boot != self.boot:
            return "host rebooted"
        if namespace != self.pid_namespace:
            return None  # its pids mean nothing here: only its lease can tell
        if attempt.tick_pid == self.pid and attempt.tick_start == self.start_token:
            # This process: its own attempt only in the tick that opened it
            # (`run` ticks many times); one of an earlier tick was left over.
            if attempt.tick_id is not None and attempt.tick_id == self._tick_id:
                return None
            return "left by an earlier tick of this process"
        if not runner.pid_alive(attempt.tick_pid):
            return "tick process is gone"
        started = runner.process_start_time(attempt.tick_pid)
        if attempt.tick_start is not None and started is not None and started != attempt.tick_start:
            return "tick process is gone (pid reused)"
        return None

    def recover(self) -> None:
        """Close attempts whose tick died, killing their process groups first.

        Killing happens outside any transaction (it may wait a grace period);
        the close is fenced on the lease token, so a tick that came back to
        life in between keeps its attempt and this one changes nothing.
        """
        for attempt, why, slug in self._retrying(lambda _again: self._orphans()):
            self._kill_orphans(attempt, slug)
            fault_point("before_recover_tx")
            try:
                self._recover_one(attempt, why, slug)
            except repo.ConflictError:
                continue

    def _orphans(self) -> list[tuple[repo.AttemptSnapshot, str, str | None]]:
        with read_tx(self.engine) as conn:
            now = db_now(conn)
            found = []
            for attempt in repo.unfinished_attempts(conn):
                why = self._orphaned(attempt, now)
                if why is not None:
                    task = repo.get_task_by_id(conn, attempt.task_id)
                    found.append((attempt, why, task.slug if task else None))
        return found

    def _recover_one(self, attempt: repo.AttemptSnapshot, why: str, slug: str | None) -> None:
        """Record the result its tick kept when the database failed it (as if
        that tick had recorded it), else close the attempt `crashed`."""
        kept = self._kept_result(attempt, slug)
        if kept is not None:
            try:
                if self._record_kept(attempt, kept):
                    return
            except repo.ConflictError:
                raise
            except Exception as exc:  # it failed its tick too: closed as a crash
                self._error(f"{slug}: recording the result attempt {attempt.number} kept", exc)
        self._retrying(lambda _again: self._close_crashed(attempt, why, kept))

    def _record_kept(self, attempt: repo.AttemptSnapshot, kept: dict[str, Any]) -> bool:
        """Record a kept result through `_record`, fenced as its own tick's
        record would have been: the attempt still open with its token, the
        task still at the version its claim gave it (else `interrupted`,
        the result in `late_result`). False when it cannot be (the task is
        gone, the config lost its stage): then it is closed like a crash."""
        version = kept.get("version")
        task = self._retrying(lambda _again: self._task(attempt.task_id))
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
        self._retrying(lambda _again: self._open_tick())
        self._retrying(functools.partial(self._record, claim, _kept_run(kept), None))
        with self._tick_lock:
            self.report.recovered += 1
        folder = self._state_dir(task.slug, attempt.stage, attempt.number)
        with contextlib.suppress(OSError):
            (folder / KEPT_RESULT).unlink()  # recorded: nothing is kept any more
        return True

    def _task(self, task_id: int) -> repo.TaskSnapshot | None:
        with read_tx(self.engine) as conn:
            return repo.get_task_by_id(conn, task_id)

    def _open_tick(self) -> None:
        with self._write() as conn:
            self._ensure_tick(conn, db_now(conn))

    def _local_pids(self, attempt: repo.AttemptSnapshot) -> bool:
        """Whether the attempt's pids are ours to judge: same host, boot, namespace."""
        return attempt.host == self.host and attempt.boot_id == self.identity

    def _kill_orphans(self, attempt: repo.AttemptSnapshot, slug: str | None) -> None:
        """Kill what the attempt started: each noted process group, and on
        Linux every process still carrying the attempt's tag (a command
        started just before the tick died has no note yet; a group whose
        leader exited cannot be matched by the leader's start time)."""
        if not self._local_pids(attempt):
            return
        grace = self.settings.kill_grace_seconds
        for ident in self._identities(attempt, slug):
            runner.kill_process_group(ident, grace=grace)
        runner.kill_tagged(runner.process_tag(attempt.lease_token), grace=grace)

    def _identities(
        self, attempt: repo.AttemptSnapshot, slug: str | None
    ) -> list[runner.ProcessIdentity]:
        """The process groups an attempt started, as recorded when they started.

        They are written to host-local files in the attempt's state folder
        (not the database: two commits per attempt saved, and only this host
        could kill them anyway). The runner kills a group only when host,
        boot id and the leader's start time all still match.
        """
        if attempt.host != self.host or slug is None:
            return []
        folder = self._state_dir(slug, attempt.stage, attempt.number)
        found = []
        for name in ("setup", "worker", "verifier"):
            try:
                data = json.loads((folder / f"{name}.proc").read_text())
                found.append(
                    runner.ProcessIdentity(
                        pid=int(data["pid"]),
                        pgid=int(data["pgid"]),
                        start_time=data["start_time"],
                        host=runner.host_name(),
                        boot_id=str(data["boot_id"]),
                    )
                )
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return found

    def _kept_result(
        self, attempt: repo.AttemptSnapshot, slug: str | None
    ) -> dict[str, Any] | None:
        """The result a tick could not record (`_keep_result`), if it left one."""
        if attempt.host != self.host or slug is None:
            return None
        path = self._state_dir(slug, attempt.stage, attempt.number) / KEPT_RESULT
        try:
            kept = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(kept, dict):
            return None
        seal = kept.pop("seal", None)
        if not isinstance(seal, str) or not hmac.compare_digest(
            seal, _seal(attempt.lease_token, kept)
        ):
            return None  # not written by the attempt's tick (a worker can write there)
        return kept

    def _state_dir(self, slug: str, stage: str, number: int) -> Path:
        return self.settings.state_root / slug / f"{stage}-{number:03d}"

    def _close_crashed(
        self, attempt: repo.AttemptSnapshot, why: str, kept: dict[str, Any] | None = None
    ) -> None:
        outcome = Outcome.CRASHED
        if kept is not None:
            if kept.get("database") is True:
                # Its tick kept a result because the database failed it: the
                # database's fault, which counts toward nothing.
                outcome = Outcome.DATABASE_ERROR
            why += "; the result its tick could not record is kept in late_result"
        with self._write() as conn:
            now = db_now(conn)
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
            )
            if not closed:
                return
            if kept is not None:
                repo.record_late_result(conn, attempt.id, kept)
            self._ensure_tick(conn, now)
            self.report.recovered += 1
            task = repo.get_task_by_id(conn, attempt.task_id)
            if task is None or task.status is not Status.RUNNING or task.stage != attempt.stage:
                return  # halted or cancelled meanwhile: the attempt just ends
            stage = self._stage_of(task)
            if stage is None:
                self._halt_unknown(conn, task, now)
                return
            decision = decide(
                task.stage,
                self._stage_names(task),
                self._policy(stage),
                repo.run_history(conn, task, excluding=attempt.id),
                outcome,
            )
            self._apply(conn, task, decision, attempt.id, now)
            fault_point("inside_recover_tx")
        fault_point("after_recover_commit")
        self.say(
            f"{task.slug}: attempt {attempt.number} at {attempt.stage} {outcome.value} ({why})"
        )

    # -- 2. approved gates move on ---------------------------------------------------

    def advance_approved(self) -> None:
        approved = self._retrying(lambda _again: self._approved())
        for task in approved:
            try:
                self._retrying(functools.partial(self._advance, task))
            except repo.ConflictError:
                continue

    def _approved(self) -> list[repo.TaskSnapshot]:
        with read_tx(self.engine) as conn:
            return repo.tasks_with_status(conn, Status.APPROVED)

    def _advance(self, task: repo.TaskSnapshot, _again: bool) -> None:
        """Move one approved gate on; a retry whose first try committed
        finds the task no longer approved and does nothing."""
        with self._write() as conn:
            current = repo.get_task_by_id(conn, task.id)
            if current is None or current.status is not Status.APPROVED:
                return
            now = db_now(conn)
            self._ensure_tick(conn, now)
            pipeline = self.settings.pipeline(current.pipeline)
            if pipeline is None or pipeline.stage(current.stage) is None:
                self._halt_unknown(conn, current, now)
                return
            to = next_state(current.state, Event.ADVANCE, pipeline.stage_names)
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
            self.report.advanced += 1
        fault_point("after_advance_commit")
        self.say(f"{task.slug}: {task.stage}:approved -> {to}")

    # -- 3. claim and run -----------------------------------------------------------

    def _claim_and_run(self, options: TickOptions) -> None:
        jobs = max(1, options.jobs)
        started = time.monotonic()
        ended_at: dict[int, float] = {}
        running: dict[Future[_Outcome], Claim] = {}
        chained: Claim | None = None
        claims = 0
        last_advance = time.monotonic()
        pool: ThreadPoolExecutor | _Inline = (
            _Inline() if jobs == 1 else ThreadPoolExecutor(jobs, thread_name_prefix="attempt")
        )
        with pool:
            exhausted = unchecked = False
            while True:
                while chained is not None or (
                    not exhausted
                    and not self.stop.is_set()
                    and len(running) < jobs
                    and self._may_claim(options, claims, started)
                ):
                    if chained is not None:
                        # Claimed (and committed) with the last record.
                        claim, chained = chained, None
                        if self.stop.is_set():
                            # A stop came since: start nothing, close it now.
                            claims += 1
                            self._release(claim)
                            continue
                    else:
                        # Running tasks are not ready, so the query passes them
                        # over; only tasks that ended ready again wait here.
                        ended_at = self._recent(ended_at)
                        # The token is made before the first try: a retry
                        # finds the claim whose commit answer was lost.
                        found = self._retrying(
                            functools.partial(
                                self._claim, ended_at.keys(), options.task, uuid.uuid4().hex
                            )
                        )
                        if found is None:
                            exhausted = True
                            break
                        claim = found
                    claims += 1
                    chain = _Chain(options, claims, started, ended_at) if jobs == 1 else None
                    running[pool.submit(self._attempt, claim, chain)] = claim
                if not running:
                    # Before ending, look once more for gates approved
                    # while the last attempts ran: they may be claimable now.
                    if unchecked and not self.stop.is_set():
                        unchecked = False
                        before = self.report.advanced
                        self.advance_approved()
                        if self.report.advanced > before:
                            exhausted = False
                            continue
                    break
                done, _ = wait(list(running), timeout=0.2, return_when=FIRST_COMPLETED)
                for future in done:
                    chained = self._ended(running.pop(future), future, ended_at) or chained
                if done and not self.stop.is_set():
                    # Gates approved meanwhile move on; looked for at most
                    # once a second, not after every (maybe instant) attempt.
                    unchecked = True
                    if time.monotonic() - last_advance >= ADVANCE_CHECK_SECONDS:
                        self.advance_approved()
                        last_advance = time.monotonic()
                        unchecked = False
                    exhausted = False

    def _ended(
        self, claim: Claim, future: Future[_Outcome], ended_at: dict[int, float]
    ) -> Claim | None:
        """Note an attempt that ended; the claim its record made, if any."""
        error = future.exception()
        ready, following = (True, None) if error is not None else future.result()
        if ready:
            ended_at[claim.task.id] = time.monotonic()
        if error is not None:
            self._error(
                f"{claim.task.slug}: attempt {claim.number} at {claim.stage.name} "
                "could not be recorded (the next tick recovers it)",
                error,
            )
        return following

    def _recent(self, ended_at: dict[int, float]) -> dict[int, float]:
        """The tasks whose last attempt ended less than `retry_interval` ago."""
        now = time.monotonic()
        return {
            task_id: ended
            for task_id, ended in ended_at.items()
            if now - ended < self.settings.retry_interval
        }

    def _may_claim(self, options: TickOptions, claims: int, started: float) -> bool:
        if options.max_tasks is not None and claims >= options.max_tasks:
            return False
        if options.max_seconds is not None and time.monotonic() - started >= options.max_seconds:
            return False
        if self._config.changed():
            self.report.stopped_claiming = "the configuration changed"
            return False
        return self.report.stopped_claiming is None

    def _claim(
        self, exclude: Collection[int], only: str | None, token: str, again: bool = False
    ) -> Claim | None:
        with self._write() as conn:
            claim = self._claim_by_token(conn, token) if again else None
            if claim is None:
                claim = self._claim_in(conn, exclude, only, token)
            if claim is not None:
                fault_point("inside_claim_tx")
        if claim is not None:
            fault_point("after_claim_commit")
            self.report.claimed += 1
        return claim

    def _claim_in(
        self, conn: Connection, exclude: Collection[int], only: str | None, token: str
    ) -> Claim | None:
        """Claim the next task in `conn`'s transaction, halting the ones whose
        stage the config lost; None when there is none, or the schema moved."""
        if current_revision(conn) != HEAD:
            self.report.stopped_claiming = "the schema revision changed"
            return None
        while True:
            task = repo.find_claimable(
                conn,
                host=self.host,
                any_host=self.settings.affinity == "any",
                exclude=exclude,
                slug=only,
            )
            if task is None:
                return None
            now = db_now(conn)
            self._ensure_tick(conn, now)
            pipeline = self.settings.pipeline(task.pipeline)
            stage = None if pipeline is None else pipeline.stage(task.stage)
            if pipeline is None or stage is None:
                self._halt_unknown(conn, task, now)
                fault_point("after_halt_unknown")
                continue
            return self._open_attempt(conn, task, pipeline, stage, now, token)

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """A write transaction of the tick's. A tick row created in one that
        then rolls back is forgotten, so the next claim creates it again
        rather than pointing at nothing."""
        had_tick = self._tick_id is not None
        outer = getattr(self._local, "lines", None)
        lines: list[str] = []
        self._local.lines = lines
        try:
            with write_tx(self.engine) as conn:
                yield conn
        except BaseException:
            if not had_tick:
                with self._tick_lock:
                    self._tick_id = None
            raise
        finally:
            self._local.lines = outer
        for line in lines:
            try:
                self.say(line)
            except Exception as exc:  # e.g. stdout closed: what committed stands
                self._error("reporting failed", exc)
                break

    def _say_after_commit(self, line: str) -> None:
        """Say `line` once the current write transaction commits; never if
        it (or the savepoint it was said in) rolls back."""
        lines = getattr(self._local, "lines", None)
        if lines is None:
            self.say(line)
        else:
            lines.append(line)

    def _claim_by_token(self, conn: Connection, token: str) -> Claim | None:
        """The claim a first try made and committed though its answer was
        lost: the open attempt holding `token`, rebuilt; None when that try
        rolled back. A task that moved since (halted) gets a version no row
        has, so the attempt's fence check stops it at once."""
        attempt = repo.attempt_with_token(conn, token)
        if attempt is None or attempt.finished_at is not None:
            return None
        task = repo.get_task_by_id(conn, attempt.task_id)
        pipeline = None if task is None else self.settings.pipeline(task.pipeline)
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
        with self._tick_lock:
            if self._tick_id is None:  # made by that try, forgotten by `_write`
                self._tick_id = attempt.tick_id
        return Claim(
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
        attempt_id = repo.open_attempt(
            conn,
            task_id=task.id,
            stage=task.stage,
            run=task.run,
            number=number,
            hint=task.next_hint,
            tick_id=self._tick_id,
            lease_token=token,
            lease_expires_at=repo.lease_expiry(now, self.settings.lease_seconds),
            host=self.host,
            boot_id=self.identity,
            tick_pid=self.pid,
            tick_start=self.start_token,
            started_at=now,
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
            host=self.host if task.host is None else None,
        )
        return Claim(
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

    # -- 4. one attempt (runs in a pool thread) ------------------------------------------

    def _attempt(self, claim: Claim, chain: _Chain | None) -> _Outcome:
        """Run and record one attempt (and, with `chain`, claim the next)."""
        self._reserve_kept(claim)
        try:
            result = self._execute(claim)
        except _HostFault as fault:
            result = self._host_fault(fault.error)
        except Exception as exc:  # one task's failure never stops the tick
            result = AttemptRun(Outcome.WORKER_ERROR, error=f"internal error: {exc}")
        folder = self._state_dir(claim.task.slug, claim.stage.name, claim.number)
        with self._tick_lock:
            note = self._capture_notes.pop(folder, None)
        if note is not None and result.outcome is not Outcome.HOST_ERROR:
            result.error = note if result.error is None else f"{result.error}; {note}"
        if result.fence_lost and self._db_down.is_set():
            # Stopped because the database stayed out of reach, not by the
            # worker's doing: an outcome that counts toward nothing.
            result = dataclasses.replace(
                result,
                outcome=Outcome.DATABASE_ERROR,
                error="stopped: the database was out of reach",
                fence_lost=False,
            )
        try:
            self._guard(claim, result)
        except Exception as exc:  # a guard's failure must not lose the attempt's result
            result.error = f"{result.error or ''}; runaway guards skipped: {exc}".lstrip("; ")
        fault_point("before_record")
        try:
            recorded = self._retrying(functools.partial(self._record, claim, result, chain))
        except Exception as exc:
            self._keep_result(claim, result, database=_database_fault(exc))
            raise
        with contextlib.suppress(OSError):
            (folder / KEPT_RESULT).unlink()  # the reserve, no longer needed
        return recorded

    def _guard(self, claim: Claim, result: AttemptRun) -> None:
        """The runaway guards' facts about an attempt that ended: whether it
        changed the workspace, and whether its worker waits and retries."""
        workspace = self.settings.workspace_root / claim.task.slug
        result.workspace_hash, result.workspace_changed = self._watch.after(
            claim.attempt_id, workspace, result.outcome
        )
        if guards.may_back_off(claim.stage, result.outcome, result.worker_exit):
            wait = self._retrying(
                lambda _again: guards.backoff_wait(
                    self.engine, claim.task, claim.attempt_id, claim.stage
                )
            )
            if wait is not None:
                result.outcome, result.backoff_seconds = Outcome.BACKOFF, wait[0]
                result.error = (
                    f"{result.error}; exit {result.worker_exit} is a retry exit code: "
                    f"waiting {wait[0]:g}s (wait {wait[1]} of {claim.stage.backoff.tries})"
                )

    def _keep_result(self, claim: Claim, run: AttemptRun, *, database: bool) -> None:
        """The record failed past its retries (the database stayed away, the
        disk is full): keep the result beside the attempt, sealed, where the
        tick that recovers it finds it and records it (`_record_kept`).
        Best effort, into the space `_reserve_kept` set aside if it fits."""
        if slug_problem(claim.task.slug) is not None:
            return  # never a path from a bad slug
        kept = {
            "outcome": run.outcome.value,
            "pass": None if run.verdict is None else run.verdict.passed,
            "score": None if run.verdict is None else run.verdict.score,
            "reasons": None if run.verdict is None else list(run.verdict.reasons),
            "next_hint": None if run.verdict is None else run.verdict.next_hint,
            "error": run.error,
            "worker_exit": run.worker_exit,
            "verifier_exit": run.verifier_exit,
            # The fence its record would have had; the next tick records it
            # only if the task is still there.
            "version": claim.task.version,
            # Whether the database (not a bug of ours) failed the record.
            "database": database,
        }
        kept["seal"] = _seal(claim.token, kept)
        path = self._state_dir(claim.task.slug, claim.stage.name, claim.number) / KEPT_RESULT
        body = json.dumps(kept, sort_keys=True).encode()
        with contextlib.suppress(OSError, ValueError):
            if len(body) <= KEPT_RESERVE and path.stat().st_size == KEPT_RESERVE:
                # Into the space reserved at the start: needs no free block.
                with path.open("r+b") as out:
                    out.write(body.ljust(KEPT_RESERVE))
                    out.flush()
                    os.fsync(out.fileno())
                return
        with contextlib.suppress(OSError, ValueError):
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(body)
            tmp.replace(path)

    def _reserve_kept(self, claim: Claim) -> None:
        """Reserve `KEPT_RESULT`'s space while there is some: a disk that
        fills up during the attempt fails its record (SQLite) and would
        fail keeping its result too, and the next tick would count a crash.
        Best effort: a folder that cannot be made fails the attempt anyway."""
        if slug_problem(claim.task.slug) is not None:
            return  # never a path from a bad slug (`_execute` refuses the attempt)
        folder = self._state_dir(claim.task.slug, claim.stage.name, claim.number)
        with contextlib.suppress(OSError):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / KEPT_RESULT).write_bytes(b" " * KEPT_RESERVE)

    def _host_fault(self, error: OrchestratorError) -> AttemptRun:
        """A folder of the host's failed under the attempt: the attempt counts
        toward nothing, the tick claims no more (the next claim would fail the
        same way) and ends with the fault's exit status, naming the folder."""
        with self._tick_lock:
            if self.report.host_fault is None:
                self.report.host_fault = error
                self.report.stopped_claiming = str(error)
        return AttemptRun(Outcome.HOST_ERROR, error=str(error))

    def _execute(self, claim: Claim) -> AttemptRun:
        slug, stage = claim.task.slug, claim.stage
        problem = slug_problem(slug)
        if problem is not None:
            return AttemptRun(Outcome.WORKER_ERROR, error=problem)
        state_dir = self._state_dir(slug, stage.name, claim.number)
        with _host_folder("state_root", self.settings.state_root):
            state_dir.mkdir(parents=True, exist_ok=True)
        guard = _FenceGuard(self, claim)
        workspace = self.settings.workspace_root / slug
        tag = runner.process_tag(claim.token)
        # Setup writes its capture files and marker in state_root: an error
        # naming a file there is that folder's, any other the workspace's.
        with (
            _host_folder("state_root", self.settings.state_root),
            _host_folder("workspace_root", self.settings.workspace_root),
        ):
            prepared = self._workspace(claim, workspace, state_dir, guard, tag)
        if prepared is not None:
            return prepared
        context = self._context(claim)
        if isinstance(context, AttemptRun):
            return context
        context_file = self._write_context(context, state_dir)
        with _host_folder("state_root", self.settings.state_root):
            prompt_file, prompt_text = self._render_prompt(claim, workspace, state_dir, context)
        values = {
            "task": slug,
            "stage": stage.name,
            "attempt": str(claim.number),
            "workspace": str(workspace),
            "prompt_file": str(prompt_file) if prompt_file else "",
            "hint": claim.hint,
            "context_file": "" if context_file is None else str(context_file),
            "prev_session": context.prev_session,
        }
        env = self._environment(
            claim.pipeline,
            stage,
            {
                "ORCHESTRATOR_TASK": slug,
                "ORCHESTRATOR_STAGE": stage.name,
                "ORCHESTRATOR_ATTEMPT": str(claim.number),
                "ORCHESTRATOR_WORKSPACE": str(workspace),
                "ORCHESTRATOR_NEXT_HINT": claim.hint,
                "ORCHESTRATOR_PREV_SCORE": claim.prev_score,
                "ORCHESTRATOR_PREV_OUTCOME": claim.prev_outcome,
                "ORCHESTRATOR_PROMPT_FILE": values["prompt_file"],
                "ORCHESTRATOR_CONTEXT_FILE": values["context_file"],
                runner.PROCESS_TAG: tag,
            },
        )
        stdin = (
            clean_text(prompt_text).encode() if stage.stdin == "prompt" and prompt_text else None
        )

        def run(name: str, argv: tuple[str, ...]) -> runner.ProcessResult:
            return self._run(name, argv, values, workspace, env, state_dir, guard, stdin)

        verdict_text: str | None = None
        worker_exit: int | None = None
        last: runner.ProcessResult | None = None  # whose output holds the verdict
        if stage.worker is not None:
            self._watch.before(claim.attempt_id, stage, workspace)
            worker = last = run("worker", stage.worker)
            worker_exit = worker.exit_code
            stopped = _stopped(worker, guard, "worker")
            if stopped is not None:
                stopped.worker_exit = worker_exit
                return stopped
            if not worker.ok and not _accepted_exit(worker, stage):
                return AttemptRun(
                    Outcome.WORKER_ERROR, error=_failure("worker", worker), worker_exit=worker_exit
                )
            verdict_text = worker.stdout
        fault_point("after_worker")
        verifier_exit: int | None = None
        if stage.verifier is not None:
            verifier = last = run("verifier", stage.verifier)
            verifier_exit = verifier.exit_code
            stopped = _stopped(verifier, guard, "verifier")
            if stopped is not None:
                stopped.worker_exit, stopped.verifier_exit = worker_exit, verifier_exit
                return stopped
            if verifier.start_error is not None:
                return AttemptRun(
                    Outcome.VERIFIER_ERROR,
                    error=f"verifier could not start: {verifier.start_error}",
                    worker_exit=worker_exit,
                )
            verdict_text = verifier.stdout
        fault_point("after_verifier")
        verdict = parse_verdict(verdict_text or "")
        if verdict is None:
            source = "verifier" if stage.verifier is not None else "worker"
            return AttemptRun(
                Outcome.INVALID_VERDICT,
                error=_no_verdict(source, last, state_dir),
                worker_exit=worker_exit,
                verifier_exit=verifier_exit,
            )
        strict = strict_pass_problem(verdict_text or "") if stage.strict_verdict else None
        if strict is not None:
            return AttemptRun(
                Outcome.INVALID_VERDICT,
                error=strict,
                worker_exit=worker_exit,
                verifier_exit=verifier_exit,
            )
        return AttemptRun(
            verdict_outcome(verdict, stage.pass_score),
            verdict=verdict,
            worker_exit=worker_exit,
            verifier_exit=verifier_exit,
        )

    def _context(self, claim: Claim) -> attempt_context.AttemptContext | AttemptRun:
        """What the attempt is told (`context`), read before anything runs; a
        database that stays away makes it a `database_error` (counting toward
        nothing), as it would later in the attempt."""
        try:
            return self._retrying(
                lambda _again: attempt_context.build_context(
                    self.engine,
                    claim.task,
                    claim.pipeline,
                    claim.stage,
                    claim.attempt_id,
                    claim.number,
                    claim.hint,
                )
            )
        except Exception as exc:
            if not _database_fault(exc):
                raise
            return AttemptRun(Outcome.DATABASE_ERROR, error=f"cannot read the context: {exc}")

    def _write_context(
        self, context: attempt_context.AttemptContext, state_dir: Path
    ) -> Path | None:
        """Write `context.json`; None when the disk cannot take it. Like a
        capture file on a full disk, that does not fail the attempt: it runs
        without the file (`{context_file}` empty), the error is noted on it,
        and the host's fault stops the tick claiming (74/77)."""
        try:
            return attempt_context.write_context(context, state_dir)
        except OSError as exc:
            error = host_error(f"cannot write state_root {self.settings.state_root}", exc)
            self._host_fault(error)
            with self._tick_lock:
                self._capture_notes[state_dir] = f"context file not written: {error}"
            return None

    def _run(
        self,
        name: str,
        argv: tuple[str, ...],
        values: dict[str, str],
        cwd: Path,
        env: dict[str, str],
        state_dir: Path,
        guard: _FenceGuard,
        stdin: bytes | None = None,
    ) -> runner.ProcessResult:
        """One command of an attempt, under its guard (stop, fence, lease),
        its output captured and its identity noted in the state folder."""
        with _host_folder("state_root", self.settings.state_root):
            result = runner.run_command(
                runner.render_argv(argv, values),
                cwd=cwd,
                env=env,
                timeout=guard.claim.stage.timeout_seconds,
                stdin_data=stdin,
                stdout_path=state_dir / f"{name}.out",
                stderr_path=state_dir / f"{name}.err",
                output_cap=self.settings.output_cap_bytes,
                grace=self.settings.kill_grace_seconds,
                on_start=lambda ident: self._record_process(state_dir / f"{name}.proc", ident),
                # Commands over within 10 ms need no note to find their orphans by.
                on_start_after=PROCESS_NOTE_AFTER,
                should_stop=guard,
            )
        if result.capture_error is not None:
            # The output is whole in memory, the verdict in it counts; the
            # host's fault still stops the tick claiming (74/77).
            error = host_error(
                f"cannot write state_root {self.settings.state_root}", result.capture_error
            )
            self._host_fault(error)
            with self._tick_lock:
                note = f"{name} output not fully captured: {error}"
                earlier = self._capture_notes.get(state_dir)
                self._capture_notes[state_dir] = note if earlier is None else f"{earlier}; {note}"
        return result

    def _environment(
        self, pipeline: PipelineConfig, stage: StageConfig, ours: dict[str, str]
    ) -> dict[str, str]:
        """The child's environment: the stage's filtered base (built once per
        tick, pipeline and stage) plus this attempt's ORCHESTRATOR_* values."""
        key = (pipeline.name, stage.name)
        base = self._environments.get(key)
        if base is None:
            base = runner.child_environment(
                os.environ, deny=self.settings.env_deny, extra=dict(stage.env), orchestrator_vars={}
            )
            self._environments[key] = base
        return {**base, **runner.child_environment({}, deny=(), extra={}, orchestrator_vars=ours)}

    def _workspace(
        self, claim: Claim, workspace: Path, state_dir: Path, guard: _FenceGuard, tag: str
    ) -> AttemptRun | None:
        """Make the task's workspace on first use (running the pipeline's
        `setup` there); None when it is ready, else the attempt's result.

        Setup runs like a worker: stopped by a signal, a halt or a lost lease,
        its identity noted for recovery. It counts as done only once it
        exited 0 (`setup.json` beside the task's state folders says so); a
        workspace left by a setup that failed or was stopped is removed and
        set up again, rather than taken as ready.
        """
        try:
            mode = os.lstat(workspace).st_mode
        except FileNotFoundError:
            mode = None
        # The slug has no separator and no `..`, so only a link can lead
        # out of the root; links are refused, wherever they point.
        if mode is not None and stat.S_ISLNK(mode):
            return AttemptRun(
                Outcome.WORKER_ERROR,
                error=f"workspace {workspace} is a link; refusing to follow it",
            )
        setup = claim.pipeline.setup
        marker = state_dir.parent / "setup.json"
        if mode is not None and (setup is None or _setup_state(marker) != "started"):
            return None  # ready (or made by hand before the task was added)
        self.settings.workspace_root.mkdir(parents=True, exist_ok=True)
        if setup is None:
            workspace.mkdir()
            return None
        if mode is not None:  # what an unfinished setup left behind
            if stat.S_ISDIR(mode):
                shutil.rmtree(workspace)
            else:
                workspace.unlink()
        _write_setup_state(marker, "started", claim.number)
        values = {
            "task": claim.task.slug,
            "stage": claim.stage.name,
            "attempt": str(claim.number),
            "workspace": str(workspace),
            "prompt_file": "",
            "hint": "",
        }
        env = runner.child_environment(
            os.environ,
            deny=self.settings.env_deny,
            extra={},
            orchestrator_vars={
                "ORCHESTRATOR_TASK": claim.task.slug,
                "ORCHESTRATOR_WORKSPACE": str(workspace),
                runner.PROCESS_TAG: tag,
            },
        )
        root = self.settings.workspace_root
        result = self._run("setup", setup, values, root, env, state_dir, guard)
        stopped = _stopped(result, guard, "setup")
        if stopped is not None:
            return stopped
        if not result.ok:
            return AttemptRun(Outcome.WORKER_ERROR, error=_failure("setup", result))
        # What setup left at the workspace's path is the task's doing, not
        # the host's: anything but a folder (or nothing) fails the attempt.
        try:
            mode = os.lstat(workspace).st_mode
        except FileNotFoundError:
            workspace.mkdir()
        else:
            if not stat.S_ISDIR(mode):
                kind = "a link" if stat.S_ISLNK(mode) else "not a folder"
                return AttemptRun(
                    Outcome.WORKER_ERROR,
                    error=f"setup left {workspace} {kind}; refusing to work there",
                )
        _write_setup_state(marker, "done", claim.number)
        return None

    def _render_prompt(
        self,
        claim: Claim,
        workspace: Path,
        state_dir: Path,
        context: attempt_context.AttemptContext,
    ) -> tuple[Path | None, str]:
        template_path = claim.stage.prompt
        if template_path is None:
            return None, ""
        template = template_path.read_text(encoding="utf-8", errors="replace")
        values = {
            "task": claim.task.slug,
            "title": claim.task.title,
            "body": claim.task.body,
            "stage": claim.stage.name,
            "attempt": str(claim.number),
            "workspace": str(workspace),
            "hint": claim.hint,
            "prev_outcome": claim.prev_outcome,
            "prev_score": claim.prev_score,
            "reasons": context.reasons,
            "history": context.history,
            "context_file": str(state_dir / attempt_context.CONTEXT_NAME),
            "prev_session": context.prev_session,
        }
        text = _PROMPT_FIELD.sub(lambda m: clean_text(values[m.group(1)]), template)
        path = state_dir / "prompt.md"
        path.write_text(text, encoding="utf-8")
        return path, text

    def _record_process(self, path: Path, ident: runner.ProcessIdentity) -> None:
        """Note the child's identity where a later tick on this host finds it
        (`_identities`); written atomically, so a reader sees all or nothing."""
        tmp = path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps(
                {
                    "pid": ident.pid,
                    "pgid": ident.pgid,
                    "start_time": ident.start_time,
                    "boot_id": ident.boot_id,
                }
            )
        )
        tmp.replace(path)
        with self._tick_lock:
            self._processes[path.parent] = ident
        fault_point("after_spawn_recorded")

    # -- 5. record -----------------------------------------------------------------

    def _record(
        self, claim: Claim, run: AttemptRun, chain: _Chain | None = None, again: bool = False
    ) -> _Outcome:
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
            "workspace_changed": run.workspace_changed,
        }
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
                f"{run.outcome.value}{score} -> {decision.state}"
                + (f" ({decision.halt_reason.value})" if decision.halt_reason else "")
            )
        except Exception as exc:  # e.g. stdout closed: the committed claim must still run
            self._error(f"{claim.task.slug}: reporting failed", exc)
        return ready, following

    def _recorded_before(
        self, conn: Connection, claim: Claim, run: AttemptRun, chain: _Chain | None
    ) -> _Outcome | None:
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

    def _claim_next(self, conn: Connection, chain: _Chain, ready_again: int | None) -> Claim | None:
        """The next claim, in the transaction recording the last attempt
        (whose task, `ready_again`, waits out `retry_interval` like the rest)."""
        if self.stop.is_set() or not self._may_claim(chain.options, chain.claims, chain.started):
            return None
        exclude = set(self._recent(chain.ended_at))
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

    def _count(self, outcome: Outcome) -> None:
        with self._tick_lock:
            self.report.outcomes[outcome.value] = self.report.outcomes.get(outcome.value, 0) + 1

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

    # -- helpers -------------------------------------------------------------------

    def _stage_of(self, task: repo.TaskSnapshot) -> StageConfig | None:
        pipeline = self.settings.pipeline(task.pipeline)
        return None if pipeline is None else pipeline.stage(task.stage)

    def _stage_names(self, task: repo.TaskSnapshot) -> tuple[str, ...]:
        pipeline = self.settings.pipeline(task.pipeline)
        return () if pipeline is None else pipeline.stage_names

    def _policy(self, stage: StageConfig) -> StagePolicy:
        return StagePolicy(
            gate=stage.gate,
            max_attempts=stage.max_attempts,
            pass_score=stage.pass_score,
            plateau=stage.plateau,
            max_interrupts=self.settings.max_interrupts,
            halt_after_no_change=stage.halt_after_no_change,
        )

    def _halt_unknown(self, conn: Connection, task: repo.TaskSnapshot, now: datetime) -> None:
        """A stage (or pipeline) the configuration no longer has: stop, loudly."""
        repo.apply_transition(
            conn,
            task,
            Event.HALT if task.status is not Status.RUNNING else Event.GIVE_UP,
            State(task.stage, Status.HALTED),
            now=now,
            actor=ACTOR,
            reason=f"pipeline {task.pipeline!r} has no stage {task.stage!r}",
            halt_reason=HaltReason.UNKNOWN_STAGE.value,
        )
        with self._tick_lock:
            self.report.halted += 1
        self._say_after_commit(f"{task.slug}: halted (unknown_stage {task.stage!r})")

    # -- dry run --------------------------------------------------------------------

    def _dry_run(self, options: TickOptions) -> None:
        """What a tick would do now, read through the claim's own query (same
        order, affinity and open-attempt rules), writing nothing."""
        with read_tx(self.engine) as conn:
            now = db_now(conn)
            for attempt in repo.unfinished_attempts(conn):
                why = self._orphaned(attempt, now)
                if why is not None:
                    self.say(f"would recover attempt {attempt.id} ({attempt.stage}): {why}")
            for task in repo.tasks_with_status(conn, Status.APPROVED):
                self.say(f"{task.slug}: would move {task.state} to its next stage")
            seen: list[int] = []
            shown = 0  # attempts, as --max-tasks counts them (a halt is none)
            while options.max_tasks is None or shown < options.max_tasks:
                found = repo.find_claimable(
                    conn,
                    host=self.host,
                    any_host=self.settings.affinity == "any",
                    exclude=seen,
                    slug=options.task,
                    lock=False,
                )
                if found is None:
                    break
                seen.append(found.id)
                stage = self._stage_of(found)
                if stage is None:
                    self.say(f"{found.slug}: would halt (unknown_stage {found.stage!r})")
                    continue
                shown += 1
                prev = repo.last_attempt(conn, found.id, found.stage)
                commands = [
                    f"{name} {list(argv)}"
                    for name, argv in (("worker", stage.worker), ("verifier", stage.verifier))
                    if argv is not None
                ]
                setup = self.settings.pipelines[found.pipeline].setup
                if setup and not (self.settings.workspace_root / found.slug).exists():
                    commands.insert(0, f"setup {list(setup)} first (no workspace yet)")
                self.say(
                    f"{found.slug}: would run {stage.name} attempt "
                    f"{1 if prev is None else prev.number + 1}: " + "; ".join(commands)
                )


class _HostFault(Exception):
    """An OSError making or writing an attempt's folders or files: the host's
    fault (a full disk, a read-only mount, no permission), not the task's."""

    def __init__(self, error: OrchestratorError) -> None:
        super().__init__(str(error))
        self.error = error


@contextmanager
def _host_folder(key: str, root: Path) -> Iterator[None]:
    """Turn an OSError in `root` into a `_HostFault` naming the folder. An
    error naming a file elsewhere (a missing prompt template) is not the
    folder's and goes on as it was; a failed write names no file at all."""
    try:
        yield
    except OSError as exc:
        named = exc.filename
        if isinstance(named, str | os.PathLike) and not Path(named).is_relative_to(root):
            raise
        raise _HostFault(host_error(f"cannot write {key} {root}", exc)) from exc


_PROMPT_FIELD = re.compile(
    r"\{(task|title|body|stage|attempt|workspace|hint|prev_outcome|prev_score"
    r"|reasons|history|context_file|prev_session)\}"
)


class _ConfigWatch:
    """Whether the config file was edited since the settings were read.

    Asked before every claim: a stat each time, the file read and hashed
    only when its stat moved (a `touch` is not an edit)."""

    def __init__(self, path: Path | None, fingerprint: str) -> None:
        self.path = path
        self.fingerprint = fingerprint
        self._seen: tuple[int, ...] | None = None

    def changed(self) -> bool:
        if self.path is None:
            return False
        try:
            st = self.path.stat()
        except OSError:
            seen = None
        else:
            seen = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
        if seen is not None and seen == self._seen:
            return False
        # A write within the timestamp's granularity of the last one can
        # keep its stat: trust a stat only once its mtime is a second old.
        fresh = seen is not None and time.time_ns() - seen[0] < 1_000_000_000
        self._seen = None if fresh else seen
        return config_fingerprint(self.path) != self.fingerprint


class _Inline:
    """The executor for `--jobs 1`: runs the attempt in the calling thread.

    No thread handoff per attempt; signals still reach the attempt, because
    the handler runs in this (main) thread between the runner's polls and
    sets the stop event the runner checks.
    """

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(
        self, fn: Callable[[Claim, _Chain | None], _Outcome], claim: Claim, chain: _Chain | None
    ) -> Future[_Outcome]:
        future: Future[_Outcome] = Future()
        try:
            result = fn(claim, chain)
        except Exception as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)
        return future


class _FenceGuard:
    """`should_stop` for the runner: the tick is stopping, or our fence moved.

    Called every poll interval; it touches the database only every few
    seconds: renewing the lease when a third of it has passed, and checking
    that the task still has the version our claim gave it (a `halt` or
    `cancel` bumps it, and the attempt must stop within seconds). When the
    lease could not be renewed for a whole lease period (the database is
    unreachable), another host may take the attempt over: it stops itself.
    """

    def __init__(self, ticker: Ticker, claim: Claim) -> None:
        self.ticker = ticker
        self.claim = claim
        self.fence_lost = False
        self.lease = ticker.settings.lease_seconds
        self.interval = min(FENCE_CHECK_SECONDS, self.lease / 3)
        self.renewed = time.monotonic()  # the claim's commit set the lease
        self.next_check = self.renewed + self.interval
        self.failing_since: float | None = None

    def __call__(self) -> bool:
        if self.ticker.stop.is_set():
            return True
        if self.ticker._db_down.is_set():
            self.fence_lost = True  # `_attempt` records it as the database's fault
            return True
        if time.monotonic() < self.next_check:
            return self.fence_lost
        self.next_check = time.monotonic() + self.interval
        asked = time.monotonic()
        try:
            with write_tx(self.ticker.engine) as conn:
                now = db_now(conn)
                ours = repo.renew_lease(
                    conn,
                    self.claim.attempt_id,
                    self.claim.token,
                    now,
                    repo.lease_expiry(now, self.lease),
                )
                task = repo.get_task_by_id(conn, self.claim.task.id)
        except Exception as exc:
            # Not renewed: go on (the next check tries again, on a fresh
            # connection) while the database may come back within the
            # reconnect bound and the lease may still hold, no longer.
            if self.failing_since is None:
                self.failing_since = asked
            if asked - self.renewed >= self.lease:
                # Only a lost connection is the database's fault (the
                # attempt counts toward nothing); a busy or failing database
                # that the task may itself cause stops it as `interrupted`.
                if isinstance(exc, ConnectionLostError):
                    self.ticker._database_down(exc)
                self.fence_lost = True
            elif (
                isinstance(exc, ConnectionLostError)
                and asked - self.failing_since >= self.ticker._reconnect_bound()
            ):
                self.ticker._database_down(exc)
                self.fence_lost = True
            return self.fence_lost
        self.failing_since = None
        self.renewed = asked
        if not ours or task is None or task.version != self.claim.task.version:
            self.fence_lost = True
        return self.fence_lost


def _seal(token: str, kept: dict[str, Any]) -> str:
    """A kept result's MAC under the attempt's lease token, which no worker
    sees (they get a hash of it): a worker writing `result.json` into its
    state folder cannot pass it off as its tick's."""
    body = json.dumps(kept, sort_keys=True).encode()
    return hmac.new(token.encode(), body, hashlib.sha256).hexdigest()


def _database_fault(exc: BaseException) -> bool:
    """Whether an error out of a record is the database's (busy, out of
    reach, full, read-only: the statuses `storage.db.translate` gives),
    rather than a fault of ours."""
    return isinstance(exc, OrchestratorError) and exc.exit_code in (69, 74, 77)


def _kept_run(kept: dict[str, Any]) -> AttemptRun:
    """The `AttemptRun` a kept result (`Ticker._keep_result`) stands for."""
    verdict = None
    if kept.get("pass") is not None and kept.get("score") is not None:
        verdict = Verdict(
            passed=bool(kept["pass"]),
            score=float(kept["score"]),
            reasons=tuple(str(r) for r in kept.get("reasons") or ()),
            next_hint=str(kept.get("next_hint") or ""),
        )
    return AttemptRun(
        Outcome(kept["outcome"]),
        verdict=verdict,
        error=kept.get("error"),
        worker_exit=kept.get("worker_exit"),
        verifier_exit=kept.get("verifier_exit"),
    )


def _setup_state(marker: Path) -> str | None:
    """ "started" or "done" for a task whose setup ran, None for none."""
    try:
        state = json.loads(marker.read_text())["state"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return state if isinstance(state, str) else None


def _write_setup_state(marker: Path, state: str, attempt: int) -> None:
    marker.parent.mkdir(parents=True, exist_ok=True)
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps({"state": state, "attempt": attempt}))
    tmp.replace(marker)


def _stopped(result: runner.ProcessResult, guard: _FenceGuard, name: str) -> AttemptRun | None:
    if result.interrupted:
        if guard.fence_lost:
            return AttemptRun(
                Outcome.INTERRUPTED, error=f"{name} stopped: the task changed", fence_lost=True
            )
        return AttemptRun(Outcome.INTERRUPTED, error=f"{name} stopped: the tick was interrupted")
    if result.timed_out:
        return AttemptRun(Outcome.TIMEOUT, error=f"{name} timed out after {result.duration:.0f}s")
    return None


def _accepted_exit(result: runner.ProcessResult, stage: StageConfig) -> bool:
    """A worker exit the stage lists in `worker_ok_exit`: on to the verifier."""
    return (
        result.start_error is None
        and result.signal is None
        and result.exit_code in stage.worker_ok_exit
    )


def _no_verdict(source: str, result: runner.ProcessResult | None, state_dir: Path) -> str:
    """The cause beside the symptom: a judge that died (`can't open file`)
    says so on stderr, which would otherwise sit unread in `<source>.err`."""
    try:
        with (state_dir / f"{source}.err").open("rb") as err:
            err.seek(0, os.SEEK_END)
            err.seek(max(0, err.tell() - 4096))
            text = err.read().decode("utf-8", "replace")
    except OSError:
        text = ""
    tail = [line.strip() for line in text.splitlines() if line.strip()][-3:]
    ended = (
        f"{source} killed by signal {result.signal}"
        if result is not None and result.signal is not None
        else f"{source} exited {None if result is None else result.exit_code}"
    )
    error = f"no JSON verdict in the {source}'s output ({ended})"
    return error + (": " + " | ".join(tail) if tail else "")


def _failure(name: str, result: runner.ProcessResult) -> str:
    if result.start_error is not None:
        return f"{name} could not start: {result.start_error}"
    if result.signal is not None:
        return f"{name} killed by signal {result.signal}"
    tail = result.stderr.strip().splitlines()[-1:] if result.stderr.strip() else []
    detail = f": {tail[0][:300]}" if tail else ""
    return f"{name} exited {result.exit_code}{detail}"


__all__ = ["Claim", "TickOptions", "TickReport", "Ticker"]
