"""Dead ticks' rows: a tick killed before it closed its `ticks` row (SIGKILL,
an OOM kill, power loss) would leave `exit_code` NULL for good; the next
tick on its host closes the row for it, with `repo.DIED_STATUS`."""

from __future__ import annotations

from sqlalchemy import Engine

from orchestrator import runner
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, read_tx, write_tx


def close_dead_ticks(engine: Engine, *, host: str, pid: int, tick_id: int | None) -> int:
    """Close this host's open tick rows whose process is gone, or that an
    earlier tick of this very process left open; how many were closed.

    A tick's pid is judged on its own host only (the lock keeps ticks on a
    host apart, so an open row of another pid is a tick still running or a
    dead one). A pid since reused by another live process keeps its row
    open until that process ends too."""
    with read_tx(engine) as conn:
        found = [
            row_id
            for row_id, row_pid in repo.open_tick_rows(conn, host)
            if row_id != tick_id and (row_pid == pid or not runner.pid_alive(row_pid))
        ]
    if not found:
        return 0
    closed = 0
    with write_tx(engine) as conn:
        now = db_now(conn)
        for row_id in found:
            closed += repo.close_dead_tick(conn, row_id, now=now)
    return closed
