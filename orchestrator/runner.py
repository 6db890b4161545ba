"""The only module of the orchestrator that starts processes.

It decides nothing about tasks: the tick renders a command, asks for a child
environment, runs it and reads back a `ProcessResult`. Decisions made here, and
why:

* **Every child gets its own session** (`start_new_session=True`) and every kill
  is `os.killpg`. Killing only the direct child leaves a grandchild that keeps
  running and holds the pipe; `communicate()` after `kill()` was measured to
  block until that grandchild exits. So timeouts, interrupts and the end of
  every run signal the whole group: SIGTERM, a grace period, then SIGKILL.
* **The group is signalled while its leader is still unreaped** where the OS
  lets us look without reaping (`os.waitid(..., WNOWAIT)`, Linux). A zombie
  leader keeps its pid, and so the group id, from being reused, so the final
  sweep can never hit a stranger's group. Without `waitid` (macOS on Python
  3.11/3.12) the leader is reaped first; the window is then microseconds wide
  and needs an empty group whose number is reused in it.
* **One selector loop** reads stdout and stderr, feeds stdin (non-blocking, in
  the same loop, so a child that never reads cannot deadlock us and a child
  that exits early only ends the feeding) and checks the deadline and
  `should_stop`. No threads and no signal handlers: the tick runs several
  attempts in threads and owns the process's signal disposition.
* **Output memory is bounded**: a head (a quarter of the cap) and a rolling tail
  (the rest, never under 64 KiB) per stream, plus byte counts. The verdict is
  printed last, so the tail is what matters; 50 MB of noise before it must not
  push it out or grow the tick.
* **The drain after exit is bounded** (about one second). A grandchild that
  escaped with `setsid` can hold the pipe for ever; we stop reading, sweep the
  group and close our ends, so a call ends within timeout + grace + ~2 s.
* **Spawn failures are results, not exceptions**: a missing binary is a task's
  problem (the attempt fails), never the tick's.
* **Argv and environment values are cleaned and capped** (NUL removed, lone
  surrogates replaced, 8 KiB): they come from verdict hints and task fields,
  which the agent controls, and a NUL or a surrogate would make `Popen` raise.
  Placeholders are substituted in one regex pass over a fixed set, never with
  `str.format`, so a literal JSON argument survives and a value that contains
  `{task}` is not expanded again.
* **Orphans are killed only when provably ours**: same host, same boot, and the
  group leader's start time unchanged. A reused pid is never signalled.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import functools
import hashlib
import json
import os
import re
import selectors
import signal as signal_module
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from orchestrator.domain.text import clean_text
from orchestrator.testing import fault_point

__all__ = [
    "MAX_VALUE_BYTES",
    "PLACEHOLDERS",
    "ProcessIdentity",
    "ProcessResult",
    "boot_id",
    "child_environment",
    "host_name",
    "kill_process_group",
    "pid_alive",
    "process_start_time",
    "render_argv",
    "run_command",
]

PLACEHOLDERS = (
    "task",
    "stage",
    "attempt",
    "workspace",
    "prompt_file",
    "hint",
    "config_dir",
    "context_file",
    "prev_session",
)
MAX_VALUE_BYTES = 8192

_PLACEHOLDER_RE = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
_ORCHESTRATOR_PREFIX = "ORCHESTRATOR_"
_READ_CHUNK = 256 * 1024
_WRITE_CHUNK = 64 * 1024
_MIN_TAIL = 64 * 1024
_DRAIN_AFTER_EXIT = 1.0
_ERROR_LIMIT = 512
_HELPER_TIMEOUT = 5.0


# --------------------------------------------------------------------------- argv and environment


def render_argv(template: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """Fill the placeholders, leaving every other brace alone.

    A missing value renders as the empty string: the tick always passes every
    one, and an empty argument is easier to diagnose than a crashed tick. The
    literal parts are cleaned too (without a cap), so a NUL in a config string
    cannot make the spawn raise.
    """
    cleaned = {name: clean_text(values.get(name, ""), MAX_VALUE_BYTES) for name in PLACEHOLDERS}

    def substitute(match: re.Match[str]) -> str:
        return cleaned[match.group(1)]

    return [clean_text(_PLACEHOLDER_RE.sub(substitute, arg)) for arg in template]


def _denied(name: str, deny: Sequence[str]) -> bool:
    """Exact names, or shell-style patterns such as ``*_TOKEN`` (case-sensitive)."""
    return any(name == pattern or fnmatch.fnmatchcase(name, pattern) for pattern in deny)


def _env_name_usable(name: str) -> bool:
    # Popen refuses names that are empty or hold "=" or NUL; drop them rather than fail.
    return bool(name) and "\x00" not in name and "=" not in name


def child_environment(
    base: Mapping[str, str],
    *,
    deny: Iterable[str],
    extra: Mapping[str, str],
    orchestrator_vars: Mapping[str, str],
) -> dict[str, str]:
    """Build the child's environment in three layers, most trusted last.

    Every inherited ``ORCHESTRATOR_*`` name is dropped, not only the database
    URL and config path: a child must never see our credentials, and a stale
    ``ORCHESTRATOR_TASK`` from an outer run must not leak through. The stage's
    ``extra`` cannot set ``ORCHESTRATOR_*`` names either (the namespace is ours,
    and the human-command guard relies on it); ``orchestrator_vars`` then sets
    exactly the names the tick chose.
    """
    patterns = tuple(deny)
    env: dict[str, str] = {}
    for name, value in base.items():
        if name.startswith(_ORCHESTRATOR_PREFIX) or _denied(name, patterns):
            continue
        _put(env, name, value)
    for name, value in extra.items():
        if not name.startswith(_ORCHESTRATOR_PREFIX):
            _put(env, name, value)
    for name, value in orchestrator_vars.items():
        _put(env, name, value)
    return env


def _put(env: dict[str, str], name: str, value: str) -> None:
    if not _env_name_usable(name):
        return
    env[clean_text(name, MAX_VALUE_BYTES)] = clean_text(value, MAX_VALUE_BYTES)


# --------------------------------------------------------------------------- process identity


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
        tmp = path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps(
                {
                    "pid": self.pid,
                    "pgid": self.pgid,
                    "start_time": self.start_time,
                    "boot_id": self.boot_id,
                }
            )
        )
        tmp.replace(path)

    @classmethod
    def read_note(cls, path: Path) -> ProcessIdentity | None:
        """The identity `write_note` left at `path`; None when there is none
        or it cannot be read (this host's name is taken for it)."""
        try:
            data = json.loads(path.read_text())
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


def _signal_group(pgid: int, sig: int) -> bool:
    """Signal a group; True when it existed. Never raises for a vanished or foreign group."""
    if pgid <= 1 or pgid == os.getpgrp():
        return False  # never our own group, init or "every process"
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _group_exists(pgid: int) -> bool:
    return _signal_group(pgid, 0)


def kill_process_group(identity: ProcessIdentity, *, grace: float = 5.0) -> bool:
    """Kill an orphaned attempt's group, but only when it is provably the one recorded.

    Refuses (returns False) on another host, another boot, an unknown boot id
    or start time, or a leader whose start time differs: a reused pid is never
    signalled. We are not the orphan's parent, so we cannot reap it; we watch
    the leader and the group instead.
    """
    if identity.host != host_name():
        return False
    current_boot = boot_id()
    if not current_boot or identity.boot_id != current_boot:
        return False
    if identity.start_time is None or identity.pgid <= 1:
        return False
    if process_start_time(identity.pid) != identity.start_time:
        return False
    if not _signal_group(identity.pgid, signal_module.SIGTERM):
        return False
    deadline = time.monotonic() + max(grace, 0.0)
    delay = 0.01
    while time.monotonic() < deadline:
        if not _group_exists(identity.pgid) or not _group_has_live_member(identity):
            return True
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
    _signal_group(identity.pgid, signal_module.SIGKILL)
    return True


def _group_has_live_member(identity: ProcessIdentity) -> bool:
    """Zombies keep a group "existing" to killpg; on Linux look past them."""
    if not sys.platform.startswith("linux"):
        return True
    if pid_alive(identity.pid):
        return True
    try:
        entries = [entry.name for entry in Path("/proc").iterdir()]
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        fields = _linux_stat_fields(int(entry))
        # fields[2] is field 5, the process group.
        if fields and len(fields) > 2 and fields[2] == str(identity.pgid) and fields[0] != "Z":
            return True
    return False


# --------------------------------------------------------------------------- running


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
    """Head and rolling tail of one stream, in bounded memory."""

    def __init__(self, output_cap: int) -> None:
        self.head_cap = max(output_cap, 0) // 4
        self.tail_cap = max(output_cap - self.head_cap, _MIN_TAIL)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            # Trim lazily (at twice the cap) so a stream of small chunks stays linear.
            if len(self.tail) > 2 * self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]

    def text(self) -> str:
        if len(self.tail) > self.tail_cap:
            del self.tail[: len(self.tail) - self.tail_cap]
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


def _open_pidfd(pid: int) -> int | None:
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        return int(pidfd_open(pid))
    except OSError:  # old kernel, or seccomp: fall back to polling
        return None


def _pipes_open(selector: selectors.BaseSelector, exit_fd: int | None) -> bool:
    return any(key.fd != exit_fd for key in selector.get_map().values())


def run_command(  # noqa: PLR0915 - one loop owns every fd, deadline and kill state on purpose
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    stdin_data: bytes | None = None,
    stdout_path: Path | None = None,
    stderr_path: Path | None = None,
    output_cap: int = 1_048_576,
    grace: float = 5.0,
    on_start: Callable[[ProcessIdentity], None] | None = None,
    on_start_after: float = 0.0,
    should_stop: Callable[[], bool] | None = None,
    poll_interval: float = 0.1,
    on_output: Callable[[bytes], None] | None = None,
) -> ProcessResult:
    """Run one command to completion, timeout or interruption; never leave its group behind.

    `on_start` receives the child's identity once it has run `on_start_after`
    seconds, and not at all when it exits sooner: recording the identity of a
    command that is over in a few milliseconds is most of what it costs.

    `stdout_path` and `stderr_path` (written when the stream is not empty)
    must be in an existing folder. Safe to call from several threads at once.
    Raises only what `on_start` or `should_stop` raise (after killing the
    group); an OSError writing the capture files is `capture_error`.
    """
    argv_t = tuple(argv)
    started = time.monotonic()
    out, err = _Capture(output_cap), _Capture(output_cap)

    blank = ProcessResult(
        argv=argv_t,
        exit_code=None,
        signal=None,
        start_error=None,
        timed_out=False,
        interrupted=False,
        stdout="",
        stderr="",
        stdout_bytes=0,
        stderr_bytes=0,
        duration=0.0,
        identity=None,
    )

    if not argv_t:
        return replace(blank, start_error="empty command")
    try:
        proc = subprocess.Popen(
            list(argv_t),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return replace(
            blank,
            start_error=_start_error(argv_t, cwd, exc),
            duration=time.monotonic() - started,
        )

    fault_point("after_spawn")  # a tick dying here leaves no note of its child
    child = _Child(proc)
    selector: selectors.BaseSelector | None = None
    exit_fd: int | None = None
    timed_out = interrupted = False
    try:
        identity = ProcessIdentity(
            pid=proc.pid, pgid=proc.pid, start_time=None, host=host_name(), boot_id=boot_id()
        )
        report_at: float | None = None if on_start is None else started + on_start_after

        def report_start() -> None:
            nonlocal identity, report_at
            report_at = None
            # The leader is unreaped until we return, so its pid (and start
            # time) cannot have been reused yet.
            identity = replace(identity, start_time=process_start_time(proc.pid))
            assert on_start is not None
            on_start(identity)

        if report_at is not None and on_start_after <= 0:
            report_start()

        assert proc.stdout is not None and proc.stderr is not None
        captures = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
        selector = selectors.DefaultSelector()
        for fd in captures:
            selector.register(fd, selectors.EVENT_READ)
        # On Linux the leader's exit is an event too (a pidfd is readable once
        # it exits), so we notice it at once instead of polling; elsewhere the
        # loop polls every poll_interval.
        exit_fd = _open_pidfd(proc.pid)
        if exit_fd is not None:
            selector.register(exit_fd, selectors.EVENT_READ)
        pending = memoryview(stdin_data if stdin_data is not None else b"")
        stdin_fd: int | None = None
        if proc.stdin is not None:
            if pending:
                stdin_fd = proc.stdin.fileno()
                os.set_blocking(stdin_fd, False)
                selector.register(stdin_fd, selectors.EVENT_WRITE)
            else:
                _close(proc.stdin)

        def stop_feeding() -> None:
            nonlocal stdin_fd
            if stdin_fd is not None:
                selector.unregister(stdin_fd)
                stdin_fd = None
                _close(proc.stdin)

        deadline = started + max(timeout, 0.0)
        next_stop_check = started
        term_sent_at: float | None = None
        killed = False
        exited_at: float | None = None
        next_exit_check = started
        idle_delay = 0.0005

        def begin_kill(now: float) -> None:
            nonlocal term_sent_at
            stop_feeding()
            term_sent_at = now
            child.signal_group(signal_module.SIGTERM)

        while True:
            now = time.monotonic()
            if report_at is not None and now >= report_at and exited_at is None:
                report_start()
            if exited_at is None and (now >= next_exit_check or not _pipes_open(selector, exit_fd)):
                next_exit_check = now + poll_interval
                if child.poll_exit():
                    exited_at = now
                    if exit_fd is not None:
                        selector.unregister(exit_fd)
            if exited_at is not None:
                if not selector.get_map() or now - exited_at >= _DRAIN_AFTER_EXIT:
                    break
            elif term_sent_at is None:
                if now >= deadline:
                    timed_out = True
                    begin_kill(now)
                elif should_stop is not None and now >= next_stop_check:
                    next_stop_check = now + poll_interval
                    if should_stop():
                        interrupted = True
                        begin_kill(now)
            elif not killed and now - term_sent_at >= grace:
                killed = True
                child.signal_group(signal_module.SIGKILL)

            wait = poll_interval
            if exited_at is not None:
                wait = min(wait, exited_at + _DRAIN_AFTER_EXIT - now)
            elif term_sent_at is None:
                wait = min(wait, deadline - now)
                if report_at is not None:
                    wait = min(wait, report_at - now)
            elif not killed:
                wait = min(wait, term_sent_at + grace - now)
            wait = max(wait, 0.0)

            if not selector.get_map():
                # Both pipes closed but the leader lives on: nothing to select on, so
                # sleep briefly (growing, as Popen.wait does) and look again.
                time.sleep(min(wait, idle_delay))
                idle_delay = min(idle_delay * 2, 0.05)
                next_exit_check = time.monotonic()
                continue

            for key, _mask in selector.select(wait):
                fd = key.fd
                if fd == exit_fd:
                    next_exit_check = 0.0  # look at once, at the top of the loop
                    continue
                if fd == stdin_fd:
                    try:
                        written = os.write(fd, pending[:_WRITE_CHUNK])
                    except BlockingIOError:
                        continue
                    except OSError:  # EPIPE and friends: the child does not want more
                        stop_feeding()
                        continue
                    pending = pending[written:]
                    if not pending:
                        stop_feeding()
                    continue
                try:
                    data = os.read(fd, _READ_CHUNK)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    captures[fd].add(data)
                    if on_output is not None:  # live progress: the last line printed
                        on_output(data)
                else:
                    selector.unregister(fd)
        stop_feeding()
    finally:
        # The sweep: anything still in the group (a grandchild that ignored SIGTERM or
        # outlived its parent, or everything when on_start/should_stop raised) goes
        # now, while the leader is still unreaped.
        child.signal_group(signal_module.SIGKILL)
        if selector is not None:
            selector.close()
        if exit_fd is not None:
            os.close(exit_fd)
        _close(proc.stdin)
        _close(proc.stdout)
        _close(proc.stderr)
        returncode = child.reap()

    stdout_text, stderr_text = out.text(), err.text()
    capture_error: OSError | None = None
    for path, text in ((stdout_path, stdout_text), (stderr_path, stderr_text)):
        # An empty stream leaves no file: most attempts print to one stream
        # only, and every file is a syscall or three on the tick's hot path.
        if path is not None and text:
            try:
                path.write_text(text, encoding="utf-8")
            except OSError as exc:
                # The file stops growing where the disk filled up; the
                # output is not lost with it (an agent's hour of work).
                capture_error = capture_error or exc
    return replace(
        blank,
        exit_code=returncode if returncode >= 0 else None,
        signal=-returncode if returncode < 0 else None,
        timed_out=timed_out,
        interrupted=interrupted,
        stdout=stdout_text,
        stderr=stderr_text,
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        duration=time.monotonic() - started,
        identity=identity,
        capture_error=capture_error,
    )
