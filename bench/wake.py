"""Idle cron ticks and the wake on approval (`python -m bench --only idle wake`).

idle: `tick -q` on a database with 100 gates waiting and nothing due,
against `python -c pass` measured in the same rounds (the fast path of
orchestrator.tick.idle); the full idle tick (`--jobs 1` takes the full
path) against the same baseline, for scale.

wake: a real `run --interval 60` process and 20 real `approve` processes,
one after another; each latency is the approval's commit (its transition's
`at`) to the next stage's attempt `started_at`, both from the database.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.__main__ import add_tasks, info, interleave, orch, project, report, timed

PY = sys.executable

GATED = """
[orchestrator]
workspace_root = "tasks"
state_root = "state"
lock_file = "orchestrator.lock"
{extra}

[[pipelines.default.stages]]
name = "plan"
gate = true
worker = ["/bin/true"]
verifier = ["/bin/echo", "{{\\"pass\\": true, \\"score\\": 1.0}}"]

[[pipelines.default.stages]]
name = "build"
worker = ["/bin/true"]
verifier = ["/bin/echo", "{{\\"pass\\": true, \\"score\\": 1.0}}"]
"""


def _gates(folder: Path, count: int, extra: str = "") -> dict[str, str]:
    env = project(folder, GATED.format(extra=extra))
    add_tasks(env, count, prefix="g")
    subprocess.run(orch("tick", "-q", "--jobs", "4"), env=env, check=True, capture_output=True)
    return env


def bench_idle(work: Path, rounds: int) -> list[tuple[str, bool | None]]:
    env = _gates(work / "idle", 100)
    timed(orch("tick", "-q"), env=env)  # a full tick notes the config for the fast path
    baseline = [PY, "-c", "pass"]
    rounds = max(rounds, 15)
    return [
        report(
            "idle cron tick (100 gates waiting) / python -c pass",
            interleave(rounds, lambda: timed(orch("tick", "-q"), env=env), lambda: timed(baseline)),
            5.0,
        ),
        info(
            "  the same tick on the full path / python -c pass",
            interleave(
                max(3, rounds // 3),
                lambda: timed(orch("tick", "-q", "--jobs", "1"), env=env),
                lambda: timed(baseline),
            ),
        ),
    ]


def _moment(value: Any) -> datetime:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _latencies(env: dict[str, str], url: str, count: int) -> list[float]:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)

    def one(sql: str, **params: Any) -> Any:
        with engine.connect() as conn:
            return conn.execute(text(sql), params).scalar()

    run = subprocess.Popen(
        orch("run", "--interval", "60", "-q"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    latencies = []
    try:
        _until(lambda: one("SELECT count(*) FROM ticks WHERE pid = :p", p=run.pid), "run's tick")
        for index in range(count):
            slug = f"g-{index}"
            subprocess.run(orch("approve", slug), env=env, check=True, capture_output=True)
            started = _until(
                lambda slug=slug: one(
                    "SELECT a.started_at FROM attempts a JOIN tasks t ON t.id = a.task_id "
                    "WHERE t.slug = :s AND a.stage = 'build'",
                    s=slug,
                ),
                f"{slug}'s build",
            )
            approved = one(
                "SELECT r.at FROM transitions r JOIN tasks t ON t.id = r.task_id "
                "WHERE t.slug = :s AND r.event = 'approve'",
                s=slug,
            )
            latencies.append((_moment(started) - _moment(approved)).total_seconds())
            _until(
                lambda slug=slug: one(
                    "SELECT status = 'complete' FROM tasks WHERE slug = :s", s=slug
                ),
                f"{slug} complete",
            )
    finally:
        run.terminate()
        run.communicate(timeout=60)
        engine.dispose()
    return latencies


def _until(probe: Any, what: str, timeout: float = 55.0) -> Any:
    """Poll the database; past `timeout` the interval (60 s) would have done it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.01)
    raise SystemExit(f"wake bench: no {what} within {timeout} s")


def bench_wake(work: Path, count: int, pg: str | None) -> list[tuple[str, bool | None]]:
    env = _gates(work / "wake-sqlite", count)
    url = f"sqlite:///{work / 'wake-sqlite' / 'orchestrator.db'}"
    results = [_latency_line("SQLite", _latencies(env, url, count))]
    if not pg:
        print("wake on PostgreSQL: skipped (pass --pg URL or set ORCHESTRATOR_TEST_PG_URL)")
        return results
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    server = make_url(pg)
    name = f"orch_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        db_url = server.set(database=name).render_as_string(hide_password=False)
        env = _gates(work / "wake-pg", count, extra=f'database = "{db_url}"')
        results.append(_latency_line("PostgreSQL", _latencies(env, db_url, count)))
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    return results


def _latency_line(backend: str, latencies: list[float]) -> tuple[str, bool]:
    line, ok = report(
        f"wake: approve -> next stage starts, run --interval 60, {backend} (s)",
        latencies,
        1.0,
        unit=" s",
    )
    print(f"  (mean {statistics.mean(latencies):.2f} s over {len(latencies)} approvals)")
    return line, ok
