"""The fence guard: the runner's `should_stop` for an attempt's commands."""

from __future__ import annotations

import time

from orchestrator.errors import ConnectionLostError
from orchestrator.ext.model import FENCE_CHECK_SECONDS, Claim
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, write_tx
from orchestrator.tick.tick_run import TickRun
from orchestrator.tick.transactions import Transactions


class FenceGuard:
    """`should_stop` for the runner: the tick is stopping, or our fence moved.

    Called every poll interval; it touches the database only every few
    seconds: renewing the lease when a third of it has passed, and checking
    that the task still has the version our claim gave it (a `halt` or
    `cancel` bumps it, and the attempt must stop within seconds). When the
    lease could not be renewed for a whole lease period (the database is
    unreachable), another host may take the attempt over: it stops itself.
    """

    def __init__(self, tick: TickRun, tx: Transactions, claim: Claim) -> None:
        self.tick = tick
        self.tx = tx
        self.claim = claim
        self.fence_lost = False
        self.lease = tx.settings.lease_seconds
        self.interval = min(FENCE_CHECK_SECONDS, self.lease / 3)
        self.renewed = time.monotonic()  # the claim's commit set the lease
        self.next_check = self.renewed + self.interval
        self.failing_since: float | None = None

    def __call__(self) -> bool:
        if self.tick.stop.is_set():
            return True
        if self.tick.db_down.is_set():
            self.fence_lost = True  # `AttemptRunner.attempt` records it as the database's fault
            return True
        if time.monotonic() < self.next_check:
            return self.fence_lost
        self.next_check = time.monotonic() + self.interval
        asked = time.monotonic()
        try:
            with write_tx(self.tx.engine) as conn:
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
                    self.tick.database_down(exc)
                self.fence_lost = True
            elif (
                isinstance(exc, ConnectionLostError)
                and asked - self.failing_since >= self.tx.reconnect_bound()
            ):
                self.tick.database_down(exc)
                self.fence_lost = True
            return self.fence_lost
        self.failing_since = None
        self.renewed = asked
        if not ours or task is None or task.version != self.claim.task.version:
            self.fence_lost = True
        return self.fence_lost
