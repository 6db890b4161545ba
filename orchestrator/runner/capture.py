"""The pieces of one run: its result, its bounded output capture and its child.

Output memory is bounded (a head and a rolling tail per stream) because the
verdict is printed last and 50 MB of noise before it must not push it out.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from orchestrator.domain.text import clean_text
from orchestrator.runner.identity import ProcessIdentity

_READ_CHUNK = 256 * 1024
_WRITE_CHUNK = 64 * 1024
_MIN_TAIL = 64 * 1024
_DRAIN_AFTER_EXIT = 1.0
_ERROR_LIMIT = 512
# The last line of a stream is kept whole up to max(output_cap, this): an
# agent's result envelope (its cost, its verdict) is one line; past this
# bound it is cut like any other output, and its cost is unknown.
LAST_LINE_CAP = 8 * 1024 * 1024


@dataclass(frozen=True)
class ProcessResult:
    """What a run produced; the tick turns it into an attempt outcome."""

    argv: tuple[str, ...]
    exit_code: int | None
    signal: int | None
    start_error: str | None
    timed_out: bool
    interrupted: bool
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int
    duration: float
    identity: ProcessIdentity | None
    # Writing a capture file failed (a full disk): the file holds what fit,
    # the output itself (and the verdict in it) is still here.
    capture_error: OSError | None = None

    @property
    def ok(self) -> bool:
        """A clean zero exit; a zero exit after our own SIGTERM is not success."""
        return (
            self.start_error is None
            and not self.timed_out
            and not self.interrupted
            and self.exit_code == 0
        )


class _Capture:
    """Head and rolling tail of one stream, in bounded memory.

    The tail never starts inside the stream's last line (up to `line_cap`
    bytes of it): an agent's result envelope is one JSON line, often longer
    than the cap, and half of it is no envelope at all.
    """

    def __init__(self, output_cap: int) -> None:
        self.head_cap = max(output_cap, 0) // 4
        self.tail_cap = max(output_cap - self.head_cap, _MIN_TAIL)
        self.line_cap = max(output_cap, LAST_LINE_CAP)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.line_start = 0  # stream offset where the last line with text starts
        self.at_line_end = True  # the stream so far ends with a newline

    def add(self, data: bytes) -> None:
        self._follow_lines(data)
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            # Trim lazily (by at least half of what is kept) so a stream of
            # small chunks stays linear, even while a long last line is kept.
            keep = self._keep()
            if len(self.tail) > keep + max(self.tail_cap, keep // 2):
                self._trim(keep)

    def _follow_lines(self, data: bytes) -> None:
        text_end = len(data.rstrip())
        if text_end == 0:
            self.at_line_end = self.at_line_end or b"\n" in data
            return
        newline = data.rfind(b"\n", 0, text_end)
        if newline >= 0:
            self.line_start = self.total + newline + 1
        elif self.at_line_end:
            self.line_start = self.total
        self.at_line_end = b"\n" in data[text_end:]

    def _keep(self) -> int:
        """Bytes of tail to keep: the tail cap, or more to hold the last line whole."""
        return max(self.tail_cap, min(self.total - self.line_start, self.line_cap))

    def _trim(self, keep: int) -> None:
        cut = len(self.tail) - keep
        if cut > 0:
            del self.tail[:cut]

    def text(self) -> str:
        self._trim(self._keep())
        omitted = self.total - len(self.head) - len(self.tail)
        tail = bytes(self.tail)
        if omitted > 0:
            # Start the tail on a character boundary rather than with U+FFFD noise.
            skip = 0
            while skip < min(3, len(tail)) and 0x80 <= tail[skip] <= 0xBF:
                skip += 1
            tail = tail[skip:]
            omitted += skip
            decoded = (
                self.head.decode("utf-8", errors="replace")
                + f"\n…[{omitted} bytes omitted]…\n"
                + tail.decode("utf-8", errors="replace")
            )
        else:
            decoded = (bytes(self.head) + tail).decode("utf-8", errors="replace")
        return clean_text(decoded)


# How `_start_error` begins when the program itself cannot start (not
# found, not executable, a bad #! line), as opposed to its folder or its
# arguments: what the tick treats as the configuration's fault.
_PROGRAM_FAULTS = (
    "command not found:",
    "permission denied: command",
    "interpreter not found",
    "cannot execute",
)


def program_cannot_start(start_error: str | None) -> bool:
    """Whether a start error says the program is missing or not executable."""
    return start_error is not None and start_error.startswith(_PROGRAM_FAULTS)


def _start_error(argv: Sequence[str], cwd: Path, exc: BaseException) -> str:
    """One line a user can act on; the attempt records it as the failure reason."""
    program = argv[0]
    filename = getattr(exc, "filename", None)
    about_cwd = filename is not None and os.fspath(filename) == os.fspath(cwd)
    if isinstance(exc, FileNotFoundError):
        if about_cwd:
            message = f"working directory not found: {os.fspath(cwd)!r}"
        elif "/" in program and (cwd / program).exists():
            message = f"interpreter not found for {program!r} (check its #! line)"
        else:
            message = f"command not found: {program!r}"
    elif isinstance(exc, PermissionError):
        target = os.fspath(cwd) if about_cwd else program
        what = "working directory" if about_cwd else "command"
        message = f"permission denied: {what} {target!r} (not executable or not accessible)"
    elif isinstance(exc, NotADirectoryError):
        target = os.fspath(cwd) if about_cwd else program
        message = f"not a directory: {target!r}"
    elif isinstance(exc, OSError) and exc.errno == errno.ENOEXEC:
        message = f"cannot execute {program!r}: exec format error (missing #! line?)"
    elif isinstance(exc, OSError):
        message = f"cannot start {program!r}: {exc.strerror or exc}"
    else:
        message = f"cannot start {program!r}: {exc}"
    return clean_text(" ".join(message.split()), _ERROR_LIMIT)


def _close(stream: IO[bytes] | None) -> None:
    # Close through the file object only: closing the raw fd as well would let a
    # second close hit a descriptor another thread has just been given.
    if stream is not None:
        with contextlib.suppress(OSError):
            stream.close()


class _Child:
    """The running leader: exit detection that leaves it unreaped where possible."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.pgid = proc.pid
        self.exited = False

    def poll_exit(self) -> bool:
        if self.exited:
            return True
        if hasattr(os, "waitid"):
            try:
                info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                info = None
                self.exited = self.proc.poll() is not None
            else:
                self.exited = info is not None
        else:
            self.exited = self.proc.poll() is not None
        return self.exited

    def signal_group(self, sig: int) -> None:
        # Direct killpg (not _signal_group): the group is ours by construction.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)

    def reap(self) -> int:
        return self.proc.wait()


def _pipes_open(selector: selectors.BaseSelector, exit_fd: int | None) -> bool:
    return any(key.fd != exit_fd for key in selector.get_map().values())
