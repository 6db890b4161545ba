"""A process's exit as an event: a pidfd (Linux 5.3+) turns readable once
the process exits, so a selector wakes at once instead of polling."""

from __future__ import annotations

import os


def open_pidfd(pid: int) -> int | None:
    """A pidfd of `pid`; None where there is none (an old kernel, seccomp):
    then the caller polls."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        return int(pidfd_open(pid))
    except OSError:
        return None
