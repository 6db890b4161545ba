"""The host's tick lock.

`filelock.FileLock` is `flock(2)` on Linux and macOS: the kernel releases it
when the holder dies, however it dies, so a SIGKILLed tick never blocks the
next one. It is advisory and per host; it keeps one
host's cron ticks from piling up and never coordinates hosts — the database's
compare-and-set claims do that. We refuse filelock's soft fallback when the
filesystem cannot `flock`: fail closed rather than run two ticks.

Who holds the lock is written to a sidecar file (`<lock>.holder`) after the
lock is taken, so a tick that finds it busy can say whom it waited for.

This module is on the path of a tick that finds the lock busy, which must
exit in a fraction of a no-op tick: it imports no SQLAlchemy.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import time
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from filelock import FileLock, Timeout

from orchestrator.errors import ConfigError, LockBusyError, OrchestratorError, host_error


class LockHeld(LockBusyError):
    """Another tick holds the lock. Its message names the holder, read only
    when someone asks: `tick -q` under cron exits 75 without reading it."""

    def __init__(self, lock: TickLock) -> None:
        super().__init__()
        self.lock = lock

    def __str__(self) -> str:
        return f"another tick holds the lock {self.lock.path} ({self.lock.holder()})"


_NO_FLOCK = frozenset({errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK})


def lock_error(path: Path, exc: OSError) -> OrchestratorError:
    """The exit status and one-line message for any OSError taking the lock:
    a traceback is never the answer to a host's filesystem problem."""
    reason = exc.strerror or str(exc)
    if exc.errno in _NO_FLOCK:
        return ConfigError(
            f"file locking is not supported where the lock file is ({path}); "
            "put `lock_file` on a local filesystem"
        )
    if isinstance(exc, FileNotFoundError):
        return ConfigError(f"cannot create the lock file {path}: {reason}")
    return host_error(f"cannot open the lock file {path}", exc)


class TickLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.holder_path = path.with_name(path.name + ".holder")
        self._note: str | None = None  # the holder note we wrote, to remove only ours
        self._lock = FileLock(str(path), timeout=0, thread_local=False, fallback_to_soft=False)

    def acquire(self, wait: float = 0.0) -> None:
        """Take the lock, waiting up to `wait` seconds; LockBusyError (75) if held."""
        try:
            self._lock.acquire(timeout=wait, poll_interval=min(0.05, max(wait, 0.01)))
        except Timeout:
            raise LockHeld(self) from None
        except OSError as exc:
            raise lock_error(self.path, exc) from exc
        self._write_holder()

    def release(self) -> None:
        if self._lock.is_locked:
            self._remove_holder()
            self._lock.release(force=True)

    def _remove_holder(self) -> None:
        """Remove the holder note only if it is still the one we wrote: when
        the lock file was deleted while we held it (a /tmp cleaner), a newer
        tick holds a new lock file and its note must stay."""
        note, self._note = self._note, None
        if note is None:
            return
        with contextlib.suppress(OSError):
            if self.holder_path.read_text() == note:
                self.holder_path.unlink()

    def _write_holder(self) -> None:
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        note = json.dumps(info)
        tmp = self.holder_path.with_name(f"{self.holder_path.name}.{os.getpid()}")
        try:
            tmp.write_text(note)
            tmp.replace(self.holder_path)
        except OSError:
            # The note is a courtesy; the lock itself is what counts. A full
            # disk must not leave a 0-byte note per failed tick behind.
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        else:
            self._note = note

    def holder(self) -> str:
        """`pid 123 on host h since 2026-…`, or a plain word when unknown."""
        for _ in range(3):
            try:
                info = json.loads(self.holder_path.read_text())
                return f"pid {info['pid']} on {info['host']} since {info['since']}"
            except FileNotFoundError:
                time.sleep(0.01)  # the holder may be writing it right now
            except (OSError, ValueError, KeyError, TypeError):
                break
        return "holder unknown"

    def __enter__(self) -> TickLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
