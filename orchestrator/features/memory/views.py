"""What `explain` says of a ready task whose stage waits for memory on the
host `explain` runs on (each host judges its own)."""

from __future__ import annotations

from sqlalchemy import Connection

from orchestrator.config import Settings, StageConfig
from orchestrator.features.memory.gate import MemoryGate, needed_mb, waiting_line


def holds_back(conn: Connection, settings: Settings, stage: StageConfig, host: str) -> str | None:
    """The line a tick on `host` would refuse an attempt of `stage` with now
    ("waiting for memory: 1.2 GB free, 2 GB needed"); None when it would
    start it, or cannot read its memory."""
    needed = needed_mb(stage)
    if needed == 0:
        return None
    free = MemoryGate(settings).free_mb(conn, host)
    return None if free is None or free >= needed else waiting_line(free, needed)
