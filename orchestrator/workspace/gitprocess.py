"""One git process, bounded: its own process group (killed whole at the
deadline), stdin from /dev/null, its heap capped (`DATA_LIMIT`), its
stdout cut at a limit and its stderr at a line's worth. What git is told
(its argv, its environment) is `gitrun.SafeGit`'s business; this module
only keeps the process from outgrowing its bounds."""

from __future__ import annotations

import os
import resource
import selectors
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.pidfd import open_pidfd

_STDERR_LIMIT = 4096
# Git's heap (RLIMIT_DATA, bytes): files it reads whole that no option
# turns off (`.git/info/attributes`, `objects/info/alternates`) may be a
# link to /dev/zero, an endless line; past the cap git fails at once
# instead of taking the host's memory until the deadline. Two sides of a
# diff below core.bigFileThreshold fit in it.
DATA_LIMIT = 2 << 30


@dataclass(frozen=True)
class GitResult:
    status: int | None  # None: git did not start, or was stopped (deadline, limit)
    stdout: bytes
    truncated: bool = False  # printed more than the limit: stopped, `stdout` is its head
    error: str = ""  # one line, when it failed

    @property
    def ok(self) -> bool:
        return self.status == 0 and not self.truncated


def run_bounded(argv: Sequence[str], env: dict[str, str], limit: int, deadline: float) -> GitResult:
    """Run `argv` to its end, or until its output passes `limit` bytes or
    the monotonic clock passes `deadline`."""
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own group: killed whole at the deadline
            close_fds=True,
        )
    except OSError as exc:
        return GitResult(None, b"", error=f"git could not start: {exc.strerror}")
    try:
        _cap_memory(proc.pid)
        stdout, stderr, why = _read(proc, limit, deadline)
        if why:
            _kill(proc)
        status = proc.wait() if not why else None
    finally:
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    if why == "limit":
        return GitResult(None, stdout[:limit], truncated=True, error="output over the limit")
    if why:
        return GitResult(None, stdout, error=why)
    first = stderr.decode("utf-8", "replace").strip().splitlines()[:1]
    return GitResult(status, stdout, error="" if status == 0 else (first or [""])[0])


def _cap_memory(pid: int) -> None:
    """Git's heap capped at DATA_LIMIT, set on the running child (subprocess
    has no rlimit of its own, a `preexec_fn` is unsafe beside the tick's
    threads, and an exec of `sh` or `prlimit` to set it first costs as much
    as a short git command). Git runs uncapped until this call: for
    microseconds, or as long as another thread holds the interpreter lock.
    From then on an allocation past the cap fails, so git outgrows the cap
    only by what it took meanwhile (reading /dev/zero, about half a GB a
    second: a thread must hold the lock for seconds before the cap is
    passed at all). A host whose hard limit is lower already keeps that
    lower one, and git runs under it."""
    try:
        _soft, hard = resource.prlimit(pid, resource.RLIMIT_DATA)
        if hard == resource.RLIM_INFINITY or hard > DATA_LIMIT:
            resource.prlimit(pid, resource.RLIMIT_DATA, (DATA_LIMIT, DATA_LIMIT))
    except OSError:  # gone already (a zombie is ESRCH on some kernels)
        pass


def _read(proc: subprocess.Popen[bytes], limit: int, deadline: float) -> tuple[bytes, bytes, str]:
    """(stdout, stderr head, why stopped: "" at EOF, "limit" or "out of time")."""
    assert proc.stdout is not None and proc.stderr is not None
    out = bytearray()
    err = bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        selector.register(proc.stderr, selectors.EVENT_READ)
        open_streams = 2
        while open_streams:
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(out), bytes(err), "out of time"
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fileobj)
                    open_streams -= 1
                elif key.fileobj is proc.stdout:
                    out += chunk
                    if len(out) > limit:
                        return bytes(out), bytes(err), "limit"
                elif len(err) < _STDERR_LIMIT:
                    err += chunk[: _STDERR_LIMIT - len(err)]
    if not _exited_by(proc, deadline):
        return bytes(out), bytes(err), "out of time"
    return bytes(out), bytes(err), ""


def _exited_by(proc: subprocess.Popen[bytes], deadline: float) -> bool:
    """Whether git exited before the deadline, woken by its exit (a pidfd)
    rather than by `Popen.wait(timeout)`'s polling sleeps, which cost more
    than a short git command itself."""
    left = max(0.0, deadline - time.monotonic())
    pidfd = open_pidfd(proc.pid)
    if pidfd is None:  # not Linux 5.3+ (or seccomp): poll, as subprocess does
        try:
            proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(pidfd, selectors.EVENT_READ)
            if not selector.select(left):
                return False
    finally:
        os.close(pidfd)
    proc.wait()
    return True


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    proc.wait()
