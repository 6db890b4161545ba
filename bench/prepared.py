"""`python -m bench.prepared [--rounds N] [--attempts N] [--pg URL]`

What `Prepared` (orchestrator/storage/prepared.py) buys: the database work
of one trivial attempt as a `--jobs 1` tick does it (close the previous
attempt and record its transition, claim the next task and open its
attempt: one write transaction), timed in one process with
`Prepared.execute` and with a stand-in that hands the same Core statement to
`Connection.execute`. Blocks of attempts alternate between the two, so both
see the same machine load; the ratio (without / with) is what to read, per
backend. Run it again when SQLAlchemy's range in pyproject
moves: `Prepared` leans on compiler details that a release may change, and it
is kept only while this ratio says it pays.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.engine import make_url

from orchestrator.domain.pipeline import Event, State, Status
from orchestrator.storage import migrate, prepared, repo, schema
from orchestrator.storage.db import db_now, make_engine, write_tx

PREPARED = prepared.Prepared.execute


def through_connection(
    self: prepared.Prepared, conn: Connection, params: Mapping[str, Any] | None = None
) -> prepared.Rows:
    """The same statement through SQLAlchemy's ordinary execution path."""
    result = conn.execute(self.statement, dict(params or {}))  # type: ignore[call-overload]
    rows = [tuple(row) for row in result] if result.returns_rows else []
    return prepared.Rows(rows, result.rowcount)


@dataclass(frozen=True)
class Open:
    """The attempt a round left open, for the next round to record."""

    task: repo.TaskSnapshot
    attempt_id: int
    token: str


def one_attempt(engine: Engine, previous: Open | None) -> Open:
    """One transaction, as a `--jobs 1` tick chains them: record the previous
    attempt (a failure, so its task is ready again), then claim the next."""
    with write_tx(engine) as conn:
        now = db_now(conn)
        if previous is not None:
            closed: dict[str, Any] = {"outcome": "failed", "pass": False, "score": 0.5}
            repo.close_attempt(conn, previous.attempt_id, previous.token, finished_at=now, **closed)
            repo.run_history(conn, previous.task)
            repo.apply_transition(
                conn,
                previous.task,
                Event.RETRY,
                State(previous.task.stage, Status.READY),
                now=now,
                actor="bench",
                attempt_id=previous.attempt_id,
            )
        schema.current_revision(conn)
        task = repo.find_claimable(conn, host="bench", any_host=True)
        assert task is not None
        last = repo.last_attempt(conn, task.id, task.stage)
        running = repo.apply_transition(
            conn, task, Event.CLAIM, State(task.stage, Status.RUNNING), now=now, actor="bench"
        )
        token = secrets.token_hex(16)
        attempt_id = repo.open_attempt(
            conn,
            task_id=task.id,
            stage=task.stage,
            run=task.run,
            number=1 if last is None else last.number + 1,
            hint="",
            tick_id=None,
            lease_token=token,
            lease_expires_at=now + timedelta(seconds=90),
            host="bench",
            boot_id="bench",
            tick_pid=os.getpid(),
            tick_start=None,
            started_at=now,
        )
    return Open(running, attempt_id, token)


def measure(url: str, rounds: int, attempts: int) -> str:
    engine = make_engine(url, create=True)
    try:
        migrate.upgrade(engine)
        with write_tx(engine) as conn:
            new = [repo.NewTask(f"t{n}", "bench", "default", "work") for n in range(20)]
            repo.insert_tasks(conn, new, db_now(conn), "bench")
        previous: Open | None = None
        wall: dict[bool, list[float]] = {True: [], False: []}
        cpu: dict[bool, list[float]] = {True: [], False: []}
        for index in range(rounds + 1):
            for fast in (True, False) if index % 2 else (False, True):
                prepared.Prepared.execute = PREPARED if fast else through_connection  # type: ignore[method-assign]
                started, used = time.perf_counter(), time.process_time()
                for _ in range(attempts):
                    previous = one_attempt(engine, previous)
                if index:  # round 0 warms both paths' caches
                    wall[fast].append((time.perf_counter() - started) / attempts * 1e6)
                    cpu[fast].append((time.process_time() - used) / attempts * 1e6)
    finally:
        prepared.Prepared.execute = PREPARED  # type: ignore[method-assign]
        engine.dispose()
    return f"{engine.dialect.name:<10}  wall {summary(wall)}\n{'':<10}  cpu  {summary(cpu)}"


def summary(times: dict[bool, list[float]]) -> str:
    ratios = [slow / fast for fast, slow in zip(times[True], times[False], strict=True)]
    return (
        f"{statistics.median(times[True]):6.0f} µs with, {statistics.median(times[False]):6.0f} "
        f"µs without: {statistics.median(ratios):.2f}x "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f}, n={len(ratios)})"
    )


@contextmanager
def pg_database(server: str) -> Iterator[str]:
    url = make_url(server)
    name = f"orch_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.prepared", description=__doc__)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--attempts", type=int, default=50, help="attempts per block")
    parser.add_argument("--pg", default=os.environ.get("ORCHESTRATOR_TEST_PG_URL"))
    args = parser.parse_args()
    print("database work of one attempt, with Prepared / without (median of rounds)")
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        print(measure(f"sqlite:///{Path(tmp) / 'o.db'}", args.rounds, args.attempts), flush=True)
    if args.pg:
        with pg_database(args.pg) as url:
            print(measure(url, args.rounds, args.attempts), flush=True)


if __name__ == "__main__":
    main()
