"""`<command>.live`: what a running command prints, appended as it prints
it, for the web page's live tail (the capture writes `<command>.out` only
once the command ended).

Bounded (`LIVE_CAP` bytes, then a last line saying so) and best effort: a
disk that refuses the file loses the tail, never the attempt. Opened with
O_NOFOLLOW each time, so a link planted in its place is not written through,
and O_NONBLOCK, so a FIFO planted there (the worker shares the folder) fails
the open at once instead of blocking the tick until someone reads it. The
folder is opened the same way and the file through it, because O_NOFOLLOW
covers the last name only: a worker that swaps its folder for a link to one
outside must not lead the tail there.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

LIVE_CAP = 1024 * 1024
_CUT = b"\n[live output cut at 1 MiB; the whole capture is in the .out file once it ends]\n"
_FLAGS = (
    os.O_WRONLY
    | os.O_APPEND
    | os.O_CREAT
    | os.O_NOFOLLOW
    | os.O_NONBLOCK
    | getattr(os, "O_CLOEXEC", 0)
)
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def live_spool(path: Path, cap: int = LIVE_CAP) -> Callable[[bytes], None]:
    written = 0

    def spool(data: bytes) -> None:
        nonlocal written
        if written > cap:
            return
        chunk = data[: max(0, cap - written)]
        if len(chunk) < len(data):
            chunk += _CUT
        written += len(data)
        with contextlib.suppress(OSError):
            folder = os.open(path.parent, _FOLDER_FLAGS)
            try:
                fd = os.open(path.name, _FLAGS, 0o600, dir_fd=folder)
                try:
                    os.write(fd, chunk)
                finally:
                    os.close(fd)
            finally:
                os.close(folder)

    return spool


def both(
    first: Callable[[bytes], None] | None, second: Callable[[bytes], None]
) -> Callable[[bytes], None]:
    if first is None:
        return second

    def each(data: bytes) -> None:
        first(data)
        second(data)

    return each
