"""Delivering events to hooks, beside the tick and never in its way.

One thread per tick does the database side (hand events out, claim due
tries, record results); each hook try runs in a thread of its own, bounded
by the hook's timeout, so a failing or hanging hook delays neither the
pipeline nor another hook. The tick wakes the courier after a transaction
that wrote an event commits (`kick`), and at its end (`close`) makes one last
pass, then claims new tries only for hooks that have not failed in this tick
and waits for the tries in flight: a hook that hangs delays the tick's end by
one of its timeouts at most. Each hook has its own in-flight limit, so a
hook that hangs holds its own slots, never another hook's.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine

from orchestrator import runner
from orchestrator.config import Settings
from orchestrator.events.hooks import HookConfig
from orchestrator.events.run_hook import run_hook
from orchestrator.storage.db import db_now, read_tx, write_tx
from orchestrator.storage.repo import deliveries

MAX_IN_FLIGHT = 8  # processes at once of each hook, per tick


class Courier:
    def __init__(self, settings: Settings, engine: Engine, *, warn: Callable[[str], None]) -> None:
        self.settings = settings
        self.engine = engine
        self.hooks = settings.hooks
        self.warn = warn
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._in_flight: dict[int, str] = {}  # delivery id -> hook name
        self._results: list[tuple[deliveries.Try[HookConfig], str | None]] = []
        self._failed: set[str] = set()  # hooks with a failed try in this tick
        self._last_pass_done = False  # the pass after close was made

    def start(self) -> None:
        """At the tick's start: retries now due, and events a dead tick (or a
        human command) committed without handing out."""
        self.kick()

    def kick(self) -> None:
        if not self.hooks:
            return  # nobody listens: events wait, untouched, for a hook to exist
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="courier", daemon=True)
                self._thread.start()
        self._wake.set()

    def close(self) -> None:
        """One last pass (for what the tick's last transactions wrote), then
        claim only for hooks that have not failed (`_claimable`): wait for
        the tries in flight (each bounded by its hook's timeout) and record
        them."""
        with self._lock:
            thread = self._thread
        if thread is None:
            return
        self._closing.set()
        self._wake.set()
        thread.join()

    # -- the courier's thread ---------------------------------------------------

    def _loop(self) -> None:
        timeout: float | None = None
        closed_at: float | None = None
        while True:
            self._wake.wait(timeout)
            self._wake.clear()
            if self._closing.is_set() and closed_at is None:
                closed_at = time.monotonic()
            try:
                self._record_results()
                hooks = self._claimable(closed_at)
                if hooks:
                    timeout = self._pass(hooks)
            except Exception as exc:  # the pipeline goes on; the next tick retries
                self._say_error(f"delivering events: {exc}")
                timeout = None
                if closed_at is not None and not self._busy():
                    return
            if closed_at is not None:
                timeout = None  # a try ending wakes the courier
                with self._lock:
                    idle = not self._in_flight and not self._results
                if idle:
                    return

    def _claimable(self, closed_at: float | None) -> tuple[HookConfig, ...]:
        """Whose due tries a pass may claim. Before the tick closes, every
        hook's; its first pass after, every hook's once more (what the
        tick's last transactions wrote). Then only hooks none of whose tries
        failed in this tick, for at most the longest hook timeout: a working
        hook's backlog goes out now, while a hook that hangs or fails gets
        nothing new, so the tick ends within one timeout of it."""
        if closed_at is None or not self._last_pass_done:
            self._last_pass_done = closed_at is not None
            return self.hooks
        if time.monotonic() - closed_at > max(hook.timeout_seconds for hook in self.hooks):
            return ()
        with self._lock:
            failed = set(self._failed)
        return tuple(hook for hook in self.hooks if hook.name not in failed)

    def _busy(self) -> bool:
        with self._lock:
            return bool(self._in_flight)

    def _pass(self, hooks: tuple[HookConfig, ...]) -> float | None:
        """Hand out new events, claim the due tries of `hooks` (as many as
        each has free slots) and start them; returns when the next try of a
        hook with a free slot is due (None: when a try ends or a kick)."""
        with write_tx(self.engine) as conn:
            now = db_now(conn)
            while deliveries.dispatch(conn, self.hooks, now) == deliveries.BATCH:
                pass
            with self._lock:
                busy = dict(self._in_flight)
            room = {
                hook.name: MAX_IN_FLIGHT - sum(1 for name in busy.values() if name == hook.name)
                for hook in hooks
            }
            due = deliveries.claim_due(conn, hooks, now, set(busy), room)
        for attempt in due:
            self._launch(attempt)
            room[attempt.hook.name] -= 1
        free = tuple(hook for hook in hooks if room[hook.name] > 0)
        if not free:
            return None  # a try ending wakes the courier
        with read_tx(self.engine) as conn:
            upcoming = deliveries.next_due(conn, free)
            now = db_now(conn)
        return None if upcoming is None else max(0.0, (upcoming - now).total_seconds())

    def _launch(self, attempt: deliveries.Try[HookConfig]) -> None:
        payload = {**attempt.payload, "links": self._links(attempt.payload)}
        data = json.dumps(payload, ensure_ascii=False, sort_keys=True).encode() + b"\n"
        # A hook is often a third party's script: like a worker, it never sees
        # our ORCHESTRATOR_* settings (the database URL), env_deny, nor any stage's secrets.
        env = runner.child_environment(
            os.environ,
            deny=self.settings.child_deny,
            extra={},
            orchestrator_vars={
                "ORCHESTRATOR_EVENT_KIND": str(payload.get("kind", "")),
                "ORCHESTRATOR_EVENT_TASK": str(payload.get("task", "")),
            },
        )

        def run() -> None:
            try:
                error = run_hook(attempt.hook, data, self.settings.base_dir, env)
            except Exception as exc:
                error = f"internal error: {exc}"
            with self._lock:
                self._results.append((attempt, error))
                self._in_flight.pop(attempt.delivery_id, None)
                if error is not None:
                    self._failed.add(attempt.hook.name)
            self._wake.set()

        thread = threading.Thread(target=run, name=f"hook {attempt.hook.name}", daemon=True)
        with self._lock:
            self._in_flight[attempt.delivery_id] = attempt.hook.name
        thread.start()

    def _record_results(self) -> None:
        """Each try in a transaction of its own: one result that cannot be
        written must not roll back the others (a working hook would then be
        sent the same event again)."""
        with self._lock:
            results, self._results = self._results, []
        kept: list[tuple[deliveries.Try[HookConfig], str | None]] = []
        problem: Exception | None = None
        for attempt, error in results:
            try:
                with write_tx(self.engine) as conn:
                    deliveries.record_try(conn, attempt, error, db_now(conn))
            except Exception as exc:
                kept.append((attempt, error))  # for the next pass (at worst, tried again later)
                problem = problem or exc
                continue
            if error is not None:
                wait = attempt.hook.backoff(attempt.tries)
                self._say_error(
                    f"hook {attempt.hook.name!r} ({attempt.payload.get('kind')} "
                    f"{attempt.payload.get('task')}), try {attempt.tries}: {error}; "
                    f"next try in {wait:g} s"
                )
        if kept:
            with self._lock:
                self._results = kept + self._results
        if problem is not None:
            raise problem

    def _links(self, payload: dict[str, Any]) -> dict[str, str]:
        """Where a reader goes next: the commands, and the task's output folder."""
        slug = str(payload.get("task", ""))
        links = {
            "show": f"orchestrator show {slug}",
            "state_dir": str(self.settings.state_root / slug),
        }
        if payload.get("kind") == "awaiting_approval":
            links["approve"] = f"orchestrator approve {slug}"
            links["reject"] = f'orchestrator reject {slug} --note "..."'
        return links

    def _say_error(self, line: str) -> None:
        try:
            self.warn(line)
        except Exception:  # stderr closed: the database has the error
            return
