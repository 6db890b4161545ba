"""Finding and killing a dead tick's children by the tag in their environment.

Recovery needs this when the tick died before noting the command's identity,
or the group's leader is gone and the group id alone proves nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal as signal_module
import sys
import time
from pathlib import Path

from orchestrator.runner.identity import pid_alive

# Every command an attempt starts carries this variable (the value derived
# from the attempt's lease token), and so do its children unless they clear
# their environment. Recovery finds an orphan by it even when the tick died
# before noting the command's identity, or the group's leader is gone.
PROCESS_TAG = "ORCHESTRATOR_PROCESS_TAG"


def process_tag(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:24]


def tagged_processes(tag: str) -> list[int]:
    """Linux: the live processes (other than us) whose environment carries `tag`."""
    if not sys.platform.startswith("linux") or not tag:
        return []
    needle = b"\0" + f"{PROCESS_TAG}={tag}".encode() + b"\0"
    found = []
    try:
        entries = [entry.name for entry in Path("/proc").iterdir() if entry.name.isdigit()]
    except OSError:
        return []
    for entry in entries:
        pid = int(entry)
        if pid == os.getpid() or not _has_tag(pid, needle):
            continue
        if pid_alive(pid):
            found.append(pid)
    return found


def _has_tag(pid: int, needle: bytes) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return needle in b"\0" + environ + b"\0"


def kill_tagged(tag: str, *, grace: float = 5.0) -> int:
    """SIGTERM every process carrying `tag`, SIGKILL what is left after `grace`.

    Each is signalled through a pidfd taken while it still carried the tag,
    so a pid reused meanwhile is never signalled. Returns how many were found.
    """
    if not sys.platform.startswith("linux") or not tag:
        return 0
    needle = b"\0" + f"{PROCESS_TAG}={tag}".encode() + b"\0"
    handles: dict[int, int] = {}
    try:
        for pid in tagged_processes(tag):
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                continue
            if _has_tag(pid, needle):  # still the same process, opened by its fd
                handles[pid] = fd
            else:
                os.close(fd)
        for fd in handles.values():
            with contextlib.suppress(OSError):
                signal_module.pidfd_send_signal(fd, signal_module.SIGTERM)
        deadline = time.monotonic() + max(grace, 0.0)
        delay = 0.01
        while time.monotonic() < deadline and any(pid_alive(pid) for pid in handles):
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
        for pid, fd in handles.items():
            if pid_alive(pid):
                with contextlib.suppress(OSError):
                    signal_module.pidfd_send_signal(fd, signal_module.SIGKILL)
        return len(handles)
    finally:
        for fd in handles.values():
            os.close(fd)
