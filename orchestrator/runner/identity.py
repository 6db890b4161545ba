"""Who a process is: host, boot, pid namespace and start time.

An orphan is signalled only when provably ours; these facts, noted when a
command starts, are what make a reused pid recognisable as a stranger.
"""

from __future__ import annotations

import functools
import json
import os
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from orchestrator import safefs

_HELPER_TIMEOUT = 5.0
_MAX_NOTE = 4096  # a note is a few numbers


@dataclass(frozen=True)
class ProcessIdentity:
    """Enough to find, and safely kill, an attempt's process group from a later tick.

    ``start_time`` guards against pid reuse and ``boot_id`` against a reboot
    (start times restart from zero); ``host`` keeps a tick on one machine from
    signalling a pid recorded by another.
    """

    pid: int
    pgid: int
    start_time: str | None
    host: str
    boot_id: str

    def write_note(self, path: Path) -> None:
        """Note this identity where a later tick on this host finds it
        (`read_note`); written atomically, so a reader sees all or nothing.
        The host is not written: a note is read only on the host that wrote it."""
        note = {
            "pid": self.pid,
            "pgid": self.pgid,
            "start_time": self.start_time,
            "boot_id": self.boot_id,
        }
        safefs.replace(path, json.dumps(note).encode())

    @classmethod
    def read_note(cls, path: Path) -> ProcessIdentity | None:
        """The identity `write_note` left at `path`; None when there is none
        or it cannot be read (this host's name is taken for it)."""
        try:
            # The attempt's commands can write in its folder: a FIFO or a
            # link there must neither block nor be followed.
            data = json.loads(safefs.read_bytes(path, _MAX_NOTE))
            return cls(
                pid=int(data["pid"]),
                pgid=int(data["pgid"]),
                start_time=data["start_time"],
                host=host_name(),
                boot_id=str(data["boot_id"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None


def host_name() -> str:
    """Not cached: a renamed host must stop matching identities recorded under the old name."""
    return socket.gethostname()


@functools.cache
def boot_id() -> str:
    """Identify this boot; "" when unknown (then no orphan is ever killed by identity)."""
    if sys.platform.startswith("linux"):
        try:
            return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
        except OSError:
            return ""
    if sys.platform == "darwin":
        # "{ sec = 1700000000, usec = 123456 } Tue Nov 14 ..." - keep the numbers, not the locale.
        out = _helper_output(["/usr/sbin/sysctl", "-n", "kern.boottime"])
        match = re.search(r"sec\s*=\s*(\d+),\s*usec\s*=\s*(\d+)", out or "")
        return f"{match.group(1)}.{match.group(2)}" if match else ""
    return ""


@functools.cache
def pid_namespace() -> str:
    """Identify this process's pid namespace ("" when unknown).

    Two containers with host networking share the hostname and the boot id
    but not their pids: a pid seen from one says nothing about the other.
    A tick may judge another tick's liveness by pid only inside its own
    namespace."""
    try:
        return str(Path("/proc/self/ns/pid").readlink())
    except OSError:
        return ""


def _helper_output(argv: list[str]) -> str | None:
    """Run a tiny system tool (macOS only) with a fixed locale and zone so its text is stable."""
    env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "LC_ALL": "C", "TZ": "UTC0"}
    try:
        completed = subprocess.run(
            argv, capture_output=True, env=env, timeout=_HELPER_TIMEOUT, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if completed.returncode != 0:
        return None
    return completed.stdout.decode("utf-8", errors="replace").strip() or None


def _linux_stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat; the command name (field 2) may hold spaces and ')'."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    _, sep, rest = raw.rpartition(b")")
    if not sep:
        return None
    return rest.decode("ascii", errors="replace").split()


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` as an opaque token; None when gone or unknown.

    Linux: field 22 of /proc/<pid>/stat (clock ticks since boot). macOS:
    ``ps -o lstart=`` in UTC. Tokens are only ever compared for equality on the
    same host and boot.
    """
    if pid <= 0:
        return None
    if sys.platform.startswith("linux"):
        fields = _linux_stat_fields(pid)
        # fields[0] is field 3 (state), so field 22 is fields[19].
        return fields[19] if fields is not None and len(fields) > 19 else None
    return _helper_output(["/bin/ps", "-o", "lstart=", "-p", str(pid)])


def pid_alive(pid: int) -> bool:
    """Whether `pid` is a running process; a zombie counts as dead (it can do nothing)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, it just is not ours
    if sys.platform.startswith("linux"):
        fields = _linux_stat_fields(pid)
        if fields is None:
            return False
        return fields[0] not in ("Z", "X")
    return True
