"""Signalling a whole process group: SIGTERM, a grace period, then SIGKILL.

Killing only the direct child leaves a grandchild that keeps running and holds
the pipe, so every kill is `os.killpg` on the child's own session.
"""

from __future__ import annotations

import os
import signal as signal_module
import sys
import time
from pathlib import Path

from orchestrator.runner.identity import (
    ProcessIdentity,
    _linux_stat_fields,
    boot_id,
    host_name,
    pid_alive,
    process_start_time,
)


def _signal_group(pgid: int, sig: int) -> bool:
    """Signal a group; True when it existed. Never raises for a vanished or foreign group."""
    if pgid <= 1 or pgid == os.getpgrp():
        return False  # never our own group, init or "every process"
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _group_exists(pgid: int) -> bool:
    return _signal_group(pgid, 0)


def kill_process_group(identity: ProcessIdentity, *, grace: float = 5.0) -> bool:
    """Kill an orphaned attempt's group, but only when it is provably the one recorded.

    Refuses (returns False) on another host, another boot, an unknown boot id
    or start time, or a leader whose start time differs: a reused pid is never
    signalled. We are not the orphan's parent, so we cannot reap it; we watch
    the leader and the group instead.
    """
    if identity.host != host_name():
        return False
    current_boot = boot_id()
    if not current_boot or identity.boot_id != current_boot:
        return False
    if identity.start_time is None or identity.pgid <= 1:
        return False
    if process_start_time(identity.pid) != identity.start_time:
        return False
    if not _signal_group(identity.pgid, signal_module.SIGTERM):
        return False
    deadline = time.monotonic() + max(grace, 0.0)
    delay = 0.01
    while time.monotonic() < deadline:
        if not _group_exists(identity.pgid) or not _group_has_live_member(identity):
            return True
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
    _signal_group(identity.pgid, signal_module.SIGKILL)
    return True


def _group_has_live_member(identity: ProcessIdentity) -> bool:
    """Zombies keep a group "existing" to killpg; on Linux look past them."""
    if not sys.platform.startswith("linux"):
        return True
    if pid_alive(identity.pid):
        return True
    try:
        entries = [entry.name for entry in Path("/proc").iterdir()]
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        fields = _linux_stat_fields(int(entry))
        # fields[2] is field 5, the process group.
        if fields and len(fields) > 2 and fields[2] == str(identity.pgid) and fields[0] != "Z":
            return True
    return False
