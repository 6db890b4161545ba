"""Ending what a command left behind when it ended: its escaped descendants.

The group sweep (`os.killpg`) misses a child that left the command's group
or session (`setsid`, a double fork). So the tick makes itself a child
subreaper (`PR_SET_CHILD_SUBREAPER`): such a child, once its parent is
gone, becomes the tick's child instead of init's, and the tick ends it.
Killing the top of an escaped tree orphans the next level, which comes to
the tick in turn, so `end_escaped` loops until a pass finds none alive
and reaps none (a process reaped in a pass may have handed its children
over after that pass listed the tick's); a process that forks while it is
being killed hands its child to the tick the same way. A process whose
main thread left (`pthread_exit`) shows as a zombie while its other
threads run on: not reapable, it is killed like a live one.

What is the ending command's: a process in its group (the leader is still
unreaped, so the group id is its own), one carrying its process tag, and,
when the command ran on the main thread (`--jobs 1`), one that came to the
tick while the command ran (the main thread started nothing else then, so
it was adopted, and only this command was running): that is how a child
that cleared its environment (`env -i`) is found. With `--jobs N` such a
child cannot be told from another attempt's and is left to recovery's tag
search, which it also escapes: a cgroup would close that gap.

The cost when nothing escaped is one read of the tick's children list.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal as signal_module
import sys
import threading
import time
from pathlib import Path

from orchestrator.runner.identity import _linux_stat_fields
from orchestrator.runner.orphans import PROCESS_TAG, _has_tag

_PR_SET_CHILD_SUBREAPER = 36
_lock = threading.Lock()
_adopting = False


def adopt_orphans() -> bool:
    """Make this process the reaper of its descendants' orphans (Linux; once).

    False where it cannot (another system, no prctl): then `end_escaped`
    falls back to a search of /proc for the command's tag."""
    global _adopting  # noqa: PLW0603 - a process-wide setting, set once
    with _lock:
        if _adopting:
            return True
        if not sys.platform.startswith("linux"):
            return False
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            done = int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
        except (OSError, AttributeError):
            return False
        _adopting = done
        return done


def _adopted() -> list[int]:
    """The main thread's children: adopted orphans land there (and its own)."""
    pid = os.getpid()
    try:
        return [int(item) for item in Path(f"/proc/{pid}/task/{pid}/children").read_bytes().split()]
    except (OSError, ValueError):
        return []


def end_escaped(leader: int, tag: str | None, *, deadline: float) -> int:
    """SIGKILL what the command led by `leader` (a zombie, unreaped) left
    running outside its group, and reap it; returns how many were ended.

    Call it after the group's SIGKILL and before the leader is reaped.
    Gives up at `deadline` (a process stuck in the kernel cannot die)."""
    if not sys.platform.startswith("linux"):
        return 0
    if not _adopting:
        return _end_tagged(tag, deadline) if tag else 0
    needle = b"\0" + f"{PROCESS_TAG}={tag}".encode() + b"\0" if tag else None
    any_tag = b"\0" + PROCESS_TAG.encode() + b"="
    inline = threading.current_thread() is threading.main_thread()
    since: int | None = None  # the leader's start, read once something is there
    killed: set[int] = set()
    ended = 0
    delay = 0.0005
    while True:
        waiting = False
        for pid in _adopted():
            if pid == leader:
                continue
            fields = _linux_stat_fields(pid)
            if fields is None or len(fields) < 20:
                continue
            ours = pid in killed or fields[2] == str(leader)
            if not ours and inline:
                if since is None:
                    since = _start(leader)
                # Came while the command ran, and no other attempt's.
                ours = (
                    since is not None
                    and int(fields[19]) >= since
                    and not _tagged_other(pid, needle, any_tag)
                )
            if not ours and needle is not None:
                # A zombie's environment is gone; a live thread's is not
                # (its main thread may have left, the others running on).
                ours = any(_has_tag(tid, needle) for tid in _threads(pid, fields[0]))
            if not ours:
                continue
            if fields[0] in ("Z", "X"):
                # Our child (adopted), dead: reaping it lets its number go.
                # Its own children came to us as it died, which may have
                # been after this pass listed ours: look again.
                try:
                    reaped = os.waitpid(pid, os.WNOHANG)[0] == pid
                except ChildProcessError:  # not ours to reap any more
                    continue
                if reaped:
                    killed.discard(pid)  # its number may be another's now
                if reaped or not _threads(pid, "Z"):
                    waiting = True  # reaped, or its last threads exiting
                    continue
                # Not reapable: its main thread left (`pthread_exit`) and
                # the others run on; still our unreaped child.
            if pid not in killed:
                # Our unreaped child: its pid cannot have been reused.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal_module.SIGKILL)
                killed.add(pid)
                ended += 1
            waiting = True
        if not waiting or time.monotonic() >= deadline:
            return ended
        time.sleep(delay)  # SIGKILLed: gone within the scheduler's next turn
        delay = min(delay * 2, 0.02)


def _threads(pid: int, state: str) -> list[int]:
    """`pid` itself when alive; for a zombie leader, its threads still alive."""
    if state not in ("Z", "X"):
        return [pid]
    try:
        tids = [int(tid.name) for tid in Path(f"/proc/{pid}/task").iterdir()]
    except (OSError, ValueError):
        return []
    found = []
    for tid in tids:
        fields = _linux_stat_fields(tid)
        if fields is not None and fields[0] not in ("Z", "X"):
            found.append(tid)
    return found


def _start(pid: int) -> int | None:
    fields = _linux_stat_fields(pid)
    try:
        return int(fields[19]) if fields is not None and len(fields) > 19 else None
    except ValueError:
        return None


def _tagged_other(pid: int, needle: bytes | None, any_tag: bytes) -> bool:
    """Whether `pid` carries another attempt's tag."""
    try:
        environ = b"\0" + Path(f"/proc/{pid}/environ").read_bytes() + b"\0"
    except OSError:
        return False
    return any_tag in environ and (needle is None or needle not in environ)


def _end_tagged(tag: str, deadline: float) -> int:
    """Without the subreaper: SIGKILL every process carrying `tag`, again
    until none is left (one may fork while being killed)."""
    from orchestrator.runner.orphans import kill_tagged, tagged_processes

    ended = 0
    while tagged_processes(tag) and time.monotonic() < deadline:
        ended += kill_tagged(tag, grace=0.0)
    return ended
