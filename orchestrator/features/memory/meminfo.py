"""What this host has: `MemAvailable` from `/proc/meminfo`, the kernel's
own estimate of what can be allocated without swapping.

`ORCHESTRATOR_TEST_MEMINFO` names a file read in its place, in the same
format. It is for tests only (a test cannot give a tick 3 GB), and it is an
environment variable rather than a config key so that no project can
carry it by mistake (docs/decisions/memory.md)."""

from __future__ import annotations

import os
from pathlib import Path

MEMINFO = "/proc/meminfo"
TEST_MEMINFO = "ORCHESTRATOR_TEST_MEMINFO"
_READ = 16384  # the file is ~1.5 kB; MemAvailable is its third line
_FIELD = b"MemAvailable:"


def available_mb() -> int | None:
    """`MemAvailable` in MiB; None when it cannot be read (no /proc, as on
    macOS, or a kernel before 3.14): then memory admits every attempt, since
    refusing would hold every agent stage forever."""
    path = os.environ.get(TEST_MEMINFO) or MEMINFO
    try:
        with Path(path).open("rb") as file:
            data = file.read(_READ)
    except OSError:
        return None
    return parse(data)


def parse(data: bytes) -> int | None:
    """`MemAvailable` of a `/proc/meminfo` text, in MiB (the file says kB)."""
    for line in data.splitlines():
        if line.startswith(_FIELD):
            parts = line.split()
            if len(parts) < 2 or not parts[1].isdigit():
                return None
            return int(parts[1]) // 1024
    return None
