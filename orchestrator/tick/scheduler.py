"""The scheduler: claim and run attempts until there is nothing to claim, a
bound is reached or the tick stops; `--jobs N` attempts at a time in a
thread pool, or `--jobs 1` inline with each record claiming the next."""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from orchestrator.config import Settings
from orchestrator.ext.model import ADVANCE_CHECK_SECONDS, Chain, Claim, Cooldown, Ended, TickOptions
from orchestrator.tick.attempt import AttemptRunner
from orchestrator.tick.claims import Claimer
from orchestrator.tick.recording import Recorder
from orchestrator.tick.tick_run import TickRun
from orchestrator.tick.transactions import Transactions

# A round's open slot is passed over while another transaction holds its
# task's row (SKIP LOCKED); a tick with free slots and running attempts
# looks again this often rather than only when an attempt ends, so the
# candidates of a round start together.
SLOT_RECHECK_SECONDS = 1.0


class Scheduler:
    """The claim loop. Claims stop at a bound, a stop, a host fault, an edited
    config or a moved schema; running attempts still end and are recorded.

    Touches no table itself: it claims through the claimer, runs through
    the attempt runner, and releases a claim it will not run through the
    recorder. Of the tick: `stop`, `report` (advanced) and survived errors."""

    def __init__(
        self,
        settings: Settings,
        tx: Transactions,
        tick: TickRun,
        claimer: Claimer,
        attempts: AttemptRunner,
        recorder: Recorder,
    ) -> None:
        self.settings = settings
        self.tx = tx
        self.tick = tick
        self.claimer = claimer
        self.attempts = attempts
        self.recorder = recorder

    def claim_and_run(self, options: TickOptions) -> None:
        jobs = max(1, options.jobs)
        started = time.monotonic()
        cooldown = Cooldown(self.settings.retry_interval)
        running: dict[Future[Ended], Claim] = {}
        chained: Claim | None = None
        claims = 0
        last_advance = time.monotonic()
        pool: ThreadPoolExecutor | Inline = (
            Inline() if jobs == 1 else ThreadPoolExecutor(jobs, thread_name_prefix="attempt")
        )
        recheck = jobs > 1 and self.claimer.registry.claims_recheck
        with pool:
            exhausted = unchecked = False
            exhausted_at = 0.0
            while True:
                while chained is not None or (
                    not exhausted
                    and not self.tick.stop.is_set()
                    and len(running) < jobs
                    and self.claimer.may_claim(options, claims, started)
                ):
                    if chained is not None:
                        # Claimed (and committed) with the last record.
                        claim, chained = chained, None
                        if self.tick.stop.is_set():
                            # A stop came since: start nothing, close it now.
                            claims += 1
                            self.recorder.release(claim)
                            continue
                    else:
                        # Running tasks are not ready, so the query passes them
                        # over; only tasks that ended ready again wait here.
                        # The token is made before the first try: a retry
                        # finds the claim whose commit answer was lost.
                        found = self.tx.retrying(
                            functools.partial(
                                self.claimer.claim,
                                cooldown.waiting(),
                                options.task,
                                uuid.uuid4().hex,
                            )
                        )
                        if found is None:
                            exhausted, exhausted_at = True, time.monotonic()
                            break
                        claim = found
                    claims += 1
                    chain = Chain(options, claims, started, cooldown) if jobs == 1 else None
                    running[pool.submit(self.attempts.attempt, claim, chain)] = claim
                if not running:
                    # Before ending, look once more for gates approved
                    # while the last attempts ran: they may be claimable now.
                    if unchecked and not self.tick.stop.is_set():
                        unchecked = False
                        before = self.tick.report.advanced
                        self.claimer.advance_approved()
                        if self.tick.report.advanced > before:
                            exhausted = False
                            continue
                    break
                done, _ = wait(list(running), timeout=0.2, return_when=FIRST_COMPLETED)
                for future in done:
                    chained = self._ended(running.pop(future), future, cooldown) or chained
                if done and not self.tick.stop.is_set():
                    # Gates approved meanwhile move on; looked for at most
                    # once a second, not after every (maybe instant) attempt.
                    unchecked = True
                    if time.monotonic() - last_advance >= ADVANCE_CHECK_SECONDS:
                        self.claimer.advance_approved()
                        last_advance = time.monotonic()
                        unchecked = False
                    exhausted = False
                elif exhausted and recheck and not self.tick.stop.is_set():
                    exhausted = time.monotonic() - exhausted_at < SLOT_RECHECK_SECONDS

    def _ended(self, claim: Claim, future: Future[Ended], cooldown: Cooldown) -> Claim | None:
        """Note an attempt that ended; the claim its record made, if any."""
        error = future.exception()
        ready, following = (True, None) if error is not None else future.result()
        if ready:
            cooldown.ended(claim.task.id)
        if error is not None:
            self.tick.error(
                f"{claim.task.slug}: attempt {claim.number} at {claim.stage.name} "
                "could not be recorded (the next tick recovers it)",
                error,
            )
        return following


class Inline:
    """The executor for `--jobs 1`: runs the attempt in the calling thread.

    No thread handoff per attempt; signals still reach the attempt, because
    the handler runs in this (main) thread between the runner's polls and
    sets the stop event the runner checks.
    """

    def __enter__(self) -> Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(
        self, fn: Callable[[Claim, Chain | None], Ended], claim: Claim, chain: Chain | None
    ) -> Future[Ended]:
        future: Future[Ended] = Future()
        try:
            result = fn(claim, chain)
        except Exception as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)
        return future
