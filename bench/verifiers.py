"""`verifiers` over a million attempts (`python -m bench --only verifiers`).

The history is bulk-inserted with raw SQL for the bench only (a million
real attempts would take hours): 100,000 tasks at a gated stage, ten
attempts each, every transition a tick writes (claim, retry, await
approval) and a person's approve or reject of the last one, so the query
meets the table sizes a long-lived project has. Measured in one process,
interleaved round by round: the whole `verifiers` report (query and
statistics) against `SELECT count(*)` over the attempts table."""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path

from bench.__main__ import interleave, project, report

CONFIG = """
[orchestrator]
workspace_root = "tasks"
state_root = "state"
lock_file = "orchestrator.lock"

[[pipelines.default.stages]]
name = "review"
gate = true
worker = ["/bin/true"]
verifier = ["/bin/echo", "{\\"pass\\": true, \\"score\\": 1.0}"]
"""

NOW = "2026-01-01 00:00:00.000000"


def populate(db: Path, tasks: int, per_task: int, seed: int = 41) -> None:
    rng = random.Random(seed)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO tasks (id, slug, title, body, pipeline, priority, stage, status, run, version,"
        " next_hint, created_at, updated_at) VALUES (?, ?, 'bench', '', 'default', 0, 'review',"
        " 'approved', 1, ?, '', ?, ?)",
        ((i, f"big-{i}", 2 * per_task + 2, NOW, NOW) for i in range(1, tasks + 1)),
    )
    attempt_id = 0
    attempts: list[tuple[object, ...]] = []
    transitions: list[tuple[object, ...]] = []
    for task in range(1, tasks + 1):
        transitions.append((task, 1, None, "review", "add", "bench", None, NOW))
        seq = 1
        approve = rng.random() < 0.7
        for number in range(1, per_task + 1):
            attempt_id += 1
            last = number == per_task
            score = round(rng.uniform(0.5, 1.0) if approve else rng.uniform(0.3, 0.8), 2)
            attempts.append(
                (
                    attempt_id,
                    task,
                    number,
                    "passed" if last else "failed",
                    int(last),
                    score if last else round(rng.random(), 2),
                    NOW,
                    NOW,
                    NOW,
                )
            )
            transitions.append(
                (task, seq + 1, "review", "review:running", "claim", "tick", None, NOW)
            )
            after = ("review:awaiting_approval", "await_approval") if last else ("review", "retry")
            transitions.append((task, seq + 2, "review:running", *after, "tick", attempt_id, NOW))
            seq += 2
        event, to = ("approve", "review:approved") if approve else ("reject", "review")
        transitions.append(
            (task, seq + 1, "review:awaiting_approval", to, event, "alice", None, NOW)
        )
        if len(attempts) >= 100_000:
            _flush(conn, attempts, transitions)
    _flush(conn, attempts, transitions)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def _flush(
    conn: sqlite3.Connection,
    attempts: list[tuple[object, ...]],
    transitions: list[tuple[object, ...]],
) -> None:
    conn.executemany(
        "INSERT INTO attempts (id, task_id, stage, run, number, outcome, pass, score, hint,"
        " lease_token, lease_expires_at, host, boot_id, tick_pid, started_at, finished_at)"
        " VALUES (?, ?, 'review', 1, ?, ?, ?, ?, '', 'x', ?, 'bench', 'b', 1, ?, ?)",
        attempts,
    )
    conn.executemany(
        "INSERT INTO transitions (task_id, seq, from_state, to_state, event, actor, attempt_id, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        transitions,
    )
    attempts.clear()
    transitions.clear()


def bench_verifiers(work: Path, rounds: int, tasks: int = 100_000) -> list[tuple[str, bool]]:
    from sqlalchemy import text

    from orchestrator.api.database import open_engine
    from orchestrator.config import load_settings
    from orchestrator.features.evidence.report import verifiers_report

    folder = work / "verifiers"
    env = project(folder, CONFIG)
    print(f"  (populating {tasks:,} tasks and {tasks * 10:,} attempts ...)", flush=True)
    populate(folder / "orchestrator.db", tasks, 10)
    settings = load_settings(config=env["ORCHESTRATOR_CONFIG"], require_config=True)
    engine = open_engine(settings)

    def measured() -> float:
        started = time.perf_counter()
        reports = verifiers_report(settings, engine)
        elapsed = time.perf_counter() - started
        assert reports[0]["decisions"] == tasks, reports
        return elapsed

    def reference() -> float:
        started = time.perf_counter()
        with engine.connect() as conn:
            conn.execute(text("SELECT count(*) FROM attempts")).scalar_one()
        return time.perf_counter() - started

    try:
        measured(), reference()  # warm the page cache for both alike
        return [
            report(
                f"verifiers, {tasks * 10:,} attempts / SELECT count(*) FROM attempts",
                interleave(rounds, measured, reference),
                3.0,
            )
        ]
    finally:
        engine.dispose()
