"""The landing's hold on a repository: the lock that serialises `merge`
landings (the merge queue), and the fence that writes the intent to move the
base only while that lock is still this landing's.

Apart from `landing`, which decides and records: what is held, by whom and
until when is the one concern here, shared by the take, the commit point
and the stale-holder rule.
"""

from __future__ import annotations

import functools
import time
from datetime import datetime, timedelta

from orchestrator import runner
from orchestrator.ext.ports import Kernel, TxPort
from orchestrator.features.landing.config import LandConfig
from orchestrator.features.landing.store import (
    LandLock,
    abandon_move,
    begin_move,
    land_lock,
    release_land_lock,
    take_land_lock,
)
from orchestrator.storage import repo
from orchestrator.storage.db import db_now

LOCK_POLL = 0.05  # seconds between looks at a busy landing lock


class RepositoryLock:
    """The repository's landing lock, a lease row per repository
    (`land_locks`): taken before a `merge` landing, freed by its record or
    when the landing fails; a holder on this host that died holds nothing."""

    def __init__(self, kernel: Kernel, owner: str) -> None:
        self.tx = kernel.tx
        self.tick = kernel.tick
        self.me = kernel.me
        self.owner = owner

    def take(
        self, key: str, task: repo.TaskSnapshot, config: LandConfig, wait: bool
    ) -> bool | None:
        """Take the repository's lock for `task`, waiting for it (at most the check's
        bound) when `wait`: True when taken, False when the task is no
        longer as read (not taken: nothing to land), None when still held."""
        deadline = time.monotonic() + (config.timeout if wait else 0.0)
        # The git steps before the check, the check, and the steps after it.
        lease = timedelta(seconds=3 * config.timeout + 60)
        while True:
            taken = self.tx.retrying(functools.partial(self._try_take, key, task, lease))
            if taken is not None:
                return taken
            if time.monotonic() >= deadline or self.tick.stop.wait(LOCK_POLL):
                return None

    def _try_take(
        self, key: str, task: repo.TaskSnapshot, lease: timedelta, _again: bool
    ) -> bool | None:
        with self.tx.write() as conn:
            now = db_now(conn)
            held = land_lock(conn, key)
            if not self._free_for_us(held, now):
                return None
            current = repo.get_task_by_id(conn, task.id)
            if current is None or current.version != task.version:
                return False
            take_land_lock(conn, key, self.owner, task.id, now + lease)
            return True

    def _free_for_us(self, held: LandLock, now: datetime) -> bool:
        if held.owner is None or held.owner == self.owner:
            return True
        if held.expires_at is not None and held.expires_at <= now:
            return True
        # A holder on this host that died (kill -9) holds nothing.
        host, _, rest = held.owner.partition("|")
        identity, _, rest = rest.partition("|")
        pid, _, start = rest.partition("|")
        if host != self.me.host or identity != self.me.identity or not pid.isdigit():
            return False
        alive = runner.pid_alive(int(pid)) and (runner.process_start_time(int(pid)) or "") == start
        return not alive

    def free(self, key: str, _again: bool) -> None:
        with self.tx.write() as conn:
            release_land_lock(conn, key, self.owner)


class MoveFence:
    """The landing's `CommitPoint` (landing/model.py): the intent to move
    the base, written only while the task is `landing` at the version this
    landing read and while this tick holds the repository's landing lock,
    in a transaction of its own (`begin_move`); withdrawn only if it is
    still this landing's own."""

    def __init__(self, tx: TxPort, task: repo.TaskSnapshot, lock: str, owner: str) -> None:
        self.tx = tx
        self.task = task
        self.lock = lock
        self.owner = owner
        self.commit: str | None = None

    def begin(self, commit: str) -> bool:
        return self.tx.retrying(functools.partial(self._begin, commit))

    def abandon(self) -> None:
        self.tx.retrying(self._abandon)

    def _begin(self, commit: str, _again: bool) -> bool:
        with self.tx.write() as conn:
            # A landing whose lease another tick took over (a check past its
            # bound) no longer holds the repository: it must not move it.
            if land_lock(conn, self.lock).owner != self.owner:
                return False
            if not begin_move(conn, self.task.id, self.task.version, commit):
                return False
        self.commit = commit
        return True

    def _abandon(self, _again: bool) -> None:
        if self.commit is None:
            return
        with self.tx.write() as conn:
            abandon_move(conn, self.task.id, self.commit)
        self.commit = None
