"""Prometheus metrics from the database alone, so any host (or the web UI's
`/metrics`) reports the same numbers whichever host ran the ticks.

`render_metrics(engine)` is the text exposition; `write_textfile` writes it
atomically (a temporary file renamed over the old) for node_exporter's
textfile collector, which must never read half a file.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import Connection, Engine

from orchestrator.domain.pipeline import Status
from orchestrator.errors import HostIOError, host_error
from orchestrator.features.pools import store as pool_rows
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, read_tx
from orchestrator.storage.reads import metrics as counts_of

PREFIX = "orchestrator"


def render_metrics(engine: Engine) -> bytes:
    """The metrics in Prometheus text format, read in one transaction."""
    return generate_latest(_registry(engine))


def write_textfile(engine: Engine, path: Path) -> None:
    """Read first, then write: a database error is the database's (its own
    status), and a file that cannot be written is one `Error:` line (77 for
    a permission or a read-only disk, 74 otherwise: a missing folder, a full
    disk), never a traceback or a temporary file left behind."""
    write_exposition(path, render_metrics(engine))


def write_exposition(path: Path, data: bytes) -> None:
    """Write metrics already read to `path` atomically, as `write_textfile`."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # not *.prom: never collected
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if exc.errno == errno.ENOENT and not path.parent.is_dir():
            raise HostIOError(f"cannot write {path}: folder {path.parent} does not exist") from exc
        raise host_error(f"cannot write {path}", exc) from exc


def _registry(engine: Engine) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_DatabaseCollector(engine))
    return registry


class _DatabaseCollector(Collector):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        with read_tx(self.engine) as conn:
            yield from _tasks(conn)
            yield from _attempts(conn)
            yield from _ticks(conn)
            yield from _approvals(conn)
            yield from _deliveries(conn)
            yield from _pools(conn)


def _tasks(conn: Connection) -> Iterator[GaugeMetricFamily]:
    family = GaugeMetricFamily(
        f"{PREFIX}_tasks", "Tasks by stage and status.", labels=["stage", "status"]
    )
    counts = {(stage, status): n for stage, status, n in counts_of.task_counts(conn)}
    for each in Status:  # every status present, at 0 when empty, for alerting
        if not any(s == each.value for _, s in counts):
            counts[("", each.value)] = 0
    for (stage, status), n in sorted(counts.items()):
        family.add_metric([stage, status], n)
    yield family


def _attempts(conn: Connection) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    finished = CounterMetricFamily(
        f"{PREFIX}_attempts", "Finished attempts by outcome.", labels=["outcome"]
    )
    running = 0
    for outcome, n in counts_of.attempt_counts(conn):
        if outcome is None:
            running = n
        else:
            finished.add_metric([outcome], n)
    yield finished
    yield GaugeMetricFamily(f"{PREFIX}_attempts_running", "Attempts open now.", value=running)


def _ticks(conn: Connection) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """Idle ticks share one row per host (counts 0, started = finished): the
    duration is of the last tick that did work, the timestamps of any tick."""
    last = counts_of.last_working_tick(conn)
    if last is not None:
        yield GaugeMetricFamily(
            f"{PREFIX}_tick_duration_seconds",
            "Duration of the last finished tick that did work.",
            value=(last[1] - last[0]).total_seconds(),
        )
    success = counts_of.last_success(conn)
    if success is not None:
        yield GaugeMetricFamily(
            f"{PREFIX}_tick_last_success_timestamp_seconds",
            "When the last tick (idle ones included) finished with exit 0 (Unix time).",
            value=_aware(success).timestamp(),
        )
    newest = repo.last_tick(conn)
    if newest is not None:
        yield GaugeMetricFamily(
            f"{PREFIX}_tick_last_timestamp_seconds",
            "When the last tick finished, idle or not, whatever its exit (Unix time).",
            value=newest.timestamp(),
        )
    recovered = counts_of.recovered_total(conn)
    yield CounterMetricFamily(
        f"{PREFIX}_recoveries",
        "Attempts closed by recovery (their tick died or lost its lease).",
        value=float(recovered or 0),
    )


def _approvals(conn: Connection) -> Iterator[GaugeMetricFamily]:
    count, oldest = counts_of.pending_approvals(conn)
    yield GaugeMetricFamily(f"{PREFIX}_approvals_pending", "Tasks waiting at a gate.", value=count)
    age = 0.0
    if oldest is not None:
        age = max(0.0, (db_now(conn) - _aware(oldest)).total_seconds())
    yield GaugeMetricFamily(
        f"{PREFIX}_approval_oldest_age_seconds",
        "How long the oldest waiting gate has waited (0 when none waits).",
        value=age,
    )


def _deliveries(conn: Connection) -> Iterator[GaugeMetricFamily]:
    pending = GaugeMetricFamily(
        f"{PREFIX}_hook_deliveries_pending", "Undelivered events per hook.", labels=["hook"]
    )
    failing = GaugeMetricFamily(
        f"{PREFIX}_hook_deliveries_failing",
        "Undelivered events per hook whose last try failed.",
        labels=["hook"],
    )
    for hook, waiting, failed in counts_of.undelivered_by_hook(conn):
        pending.add_metric([hook], waiting)
        failing.add_metric([hook], failed)
    yield pending
    yield failing


def _pools(conn: Connection) -> Iterator[GaugeMetricFamily]:
    """Per pool the database knows of (a claim met it): running attempts,
    the pause's end (0: not paused) and today's (UTC) recorded spend."""
    now = db_now(conn)
    rows = pool_rows.pool_rows(conn)
    running = pool_rows.running_by_pool(conn)
    names = sorted(set(rows) | set(running))
    open_now = GaugeMetricFamily(
        f"{PREFIX}_pool_attempts_running", "Open attempts by pool.", labels=["pool"]
    )
    paused = GaugeMetricFamily(
        f"{PREFIX}_pool_paused_until_timestamp_seconds",
        "When the pool's usage-limit pause ends (Unix time); 0 when it is not paused.",
        labels=["pool"],
    )
    spent = GaugeMetricFamily(
        f"{PREFIX}_pool_spent_today_usd",
        "Recorded cost of the pool's attempts finished since UTC midnight.",
        labels=["pool"],
    )
    since = pool_rows.day_start(now)
    for name in names:
        row = rows.get(name)
        until = None if row is None else row.paused_until
        open_now.add_metric([name], running.get(name, 0))
        paused.add_metric([name], until.timestamp() if until is not None and until > now else 0)
        spent.add_metric([name], pool_rows.spent_since(conn, name, since))
    yield open_now
    yield paused
    yield spent


def _aware(value: datetime | str) -> datetime:
    """Aggregates lose the column's type on SQLite: text or naive UTC."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value
