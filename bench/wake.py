"""Idle cron ticks and the wake on approval (`python -m bench --only idle wake`).

idle: the very line `orchestrator cron` prints, run as cron runs it (`sh
-c` in the user's home folder, cron's minimal environment), on a database
with 100 gates waiting and nothing due, against `python -c pass` run the
same way in the same rounds (the fast path of orchestrator.tick.idle);
then `tick -q` in the project's folder, and the full idle tick (`--jobs 1`
takes the full path), against the same baseline, for scale.

wake: a real `run --interval 60` process and 20 real `approve` processes,
one after another; each latency is the approval's commit (its transition's
`at`) to the next stage's attempt `started_at`, both from the database.
"""

from __future__ import annotations

import os
import shlex
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


def cron_command(env: dict[str, str]) -> str:
    """The command of the line `orchestrator cron` prints, as cron hands it
    to the shell: the five schedule fields off, `\\%` back to `%`."""
    printed = subprocess.run(orch("cron"), env=env, check=True, capture_output=True, text=True)
    line = printed.stdout.strip()
    return line.split(None, 5)[5].replace("\\%", "%")


def cron_env() -> tuple[Path, dict[str, str]]:
    """Cron's folder (the home folder) and its environment: HOME, LOGNAME,
    SHELL and a bare PATH, nothing of this shell's."""
    home = Path.home()
    user = os.environ.get("LOGNAME") or os.environ.get("USER") or "nobody"
    return home, {"HOME": str(home), "LOGNAME": user, "SHELL": "/bin/sh", "PATH": "/usr/bin:/bin"}


def bench_idle(work: Path, rounds: int) -> list[tuple[str, bool | None]]:
    env = _gates(work / "idle", 100)
    command = cron_command(env)
    home, cron = cron_env()
    print(f"  the cron line: {command}", flush=True)

    def as_cron(shell_command: str) -> float:
        return timed(["/bin/sh", "-c", shell_command], cwd=home, env=cron)

    baseline = f"{shlex.quote(PY)} -c pass"
    as_cron(command)  # the first cron tick is a full one; it notes the config
    rounds = max(rounds, 15)
    results = [
        report(
            "cron line's idle tick (100 gates waiting) / python -c pass",
            interleave(rounds, lambda: as_cron(command), lambda: as_cron(baseline)),
            3.0,
        ),
        info(
            "  tick -q in the project's folder / python -c pass",
            interleave(
                rounds,
                lambda: timed(orch("tick", "-q"), env=env),
                lambda: timed([PY, "-c", "pass"]),
            ),
        ),
        info(
            "  the same tick on the full path / python -c pass",
            interleave(
                max(3, rounds // 3),
                lambda: timed(orch("tick", "-q", "--jobs", "1"), env=env),
                lambda: timed([PY, "-c", "pass"]),
            ),
        ),
    ]
    log = work / "idle" / "orchestrator.log"
    if log.exists() and log.read_text().strip():
        raise SystemExit(f"idle bench: the cron line wrote to its log: {log.read_text()[-500:]}")
    return results


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
