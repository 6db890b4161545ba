"""A git step of the orchestrator's own failed: whose fault is it?

Two questions, each answered by looking rather than by reading git's words:

- `unwritable`: can the folders git writes be written at all? A failed
  probe (a read-only mount, no permission, a full disk) makes the failure
  the host's: named, retried by a later tick, charged to no task. A probe
  that succeeds leaves the failure to the caller (a worker's doing stays
  the task's).
- `clear_stale_lock`: an `index.lock` git left behind when its writer
  died. Git itself refuses to go on and asks the user to remove the file
  "if no other git process is currently running". The same rule,
  automated: the lock is removed only when no process this user can see
  holds it open or works in the worktree (its folder or its git folder),
  and it is older than the operation that found it. A lock anyone might
  still own is left alone, and the step fails as git says.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from orchestrator.errors import HostFault, OrchestratorError, host_error

_PROBE_BYTES = 4096  # a block: an empty file can still be made on a full disk
INDEX_LOCK = "index.lock"


def unwritable(folders: Iterable[tuple[str, Path]]) -> OrchestratorError | None:
    """The host's error for the first `(name, folder)` a file cannot be
    written in (77 for a permission or a read-only mount, 74 otherwise),
    or None when every one takes a file. A folder that is not there is
    skipped: git's own message says more about it than a probe could."""
    for name, folder in folders:
        if not folder.is_dir():
            continue
        try:
            fd, path = tempfile.mkstemp(prefix=".orchestrator-probe-", dir=folder)
        except OSError as exc:
            return host_error(f"cannot write {name} {folder}", exc)
        try:
            try:
                os.write(fd, b"\0" * _PROBE_BYTES)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            return host_error(f"cannot write {name} {folder}", exc)
        finally:
            with contextlib.suppress(OSError):
                Path(path).unlink()
    return None


def host_fault(repository: Path, exc: Exception, *folders: tuple[str, Path]) -> None:
    """After a git step of ours failed: raise the host's fault when the
    repository's git folder (or one of `folders`) cannot be written (a
    read-only mount, no permission, a full disk), so the attempt counts
    toward nothing and the tick stops claiming; else return, and the
    failure stays the caller's to judge."""
    dot_git = repository / ".git"
    error = unwritable([("repository", dot_git), ("repository", dot_git / "objects"), *folders])
    if error is not None:
        raise HostFault(error) from exc


def clear_stale_lock(lock: Path, working: Sequence[Path], started: float) -> bool:
    """Remove `lock` when its owner is gone (see the module's rule); whether
    it was removed. `working` are the folders a live git owning it would
    work in; `started` is when the operation that met the lock began (a
    `time.time()`), so a lock made since is never taken for a stale one."""
    try:
        seen = os.lstat(lock)
    except OSError:
        return False
    if not stat.S_ISREG(seen.st_mode) or seen.st_mtime >= started:
        return False
    if _in_use(Path(os.path.realpath(lock)), [Path(os.path.realpath(w)) for w in working]):
        return False
    try:
        again = os.lstat(lock)
        if (again.st_ino, again.st_mtime_ns) != (seen.st_ino, seen.st_mtime_ns):
            return False  # released and taken again meanwhile: a live owner's
        lock.unlink()
    except OSError:
        return False
    return True


def _in_use(lock: Path, working: list[Path]) -> bool:
    """Whether a process (other than this one) has `lock` open or its
    working folder in one of `working`. Processes this user may not look
    into are passed over: on a shared host another user's git does not
    work in the orchestrator's worktrees."""
    me = os.getpid()
    try:
        processes = [p for p in Path("/proc").iterdir() if p.name.isdigit()]
    except OSError:
        return True  # nothing can be seen: nothing may be judged stale
    for process in processes:
        if process.name == str(me):
            continue
        try:
            cwd: Path | None = (process / "cwd").readlink()
        except OSError:
            cwd = None
        if cwd is not None and any(cwd.is_relative_to(w) for w in working):
            return True
        try:
            fds = list((process / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if fd.readlink() == lock:
                    return True
            except OSError:
                continue
    return False
