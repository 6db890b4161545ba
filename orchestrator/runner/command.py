"""`run_command`: the one selector loop that runs a child to its end.

One loop reads stdout and stderr, feeds stdin and checks the deadline and
`should_stop`, with no threads and no signal handlers, because the tick runs
several attempts in threads and owns the process's signal disposition.
"""

from __future__ import annotations

import os
import selectors
import signal as signal_module
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from orchestrator import safefs
from orchestrator.pidfd import open_pidfd
from orchestrator.runner.capture import (
    _DRAIN_AFTER_EXIT,
    _READ_CHUNK,
    _WRITE_CHUNK,
    ProcessResult,
    _Capture,
    _Child,
    _close,
    _pipes_open,
    _start_error,
)
from orchestrator.runner.identity import ProcessIdentity, boot_id, host_name, process_start_time
from orchestrator.runner.orphans import PROCESS_TAG
from orchestrator.runner.reaper import end_escaped
from orchestrator.testing import fault_point


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
        exit_fd = open_pidfd(proc.pid)
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
        _end_escaped(proc.pid, env.get(PROCESS_TAG), grace)
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
                # A fresh file renamed into place: a link the command
                # planted at the name is replaced, never written through.
                safefs.replace(path, text.encode("utf-8"), keep_partial=True)
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


def _end_escaped(leader: int, tag: str | None, grace: float) -> None:
    """What left the group (`setsid`, a double fork) ends with the command
    too (`reaper.end_escaped`), before it returns: the verifier then judges
    a still workspace, and the record holds what was judged. The leader,
    sent SIGKILL, is waited for (not reaped) first: only once it is gone do
    its children come to us."""
    if not hasattr(os, "waitid"):
        return
    try:
        os.waitid(os.P_PID, leader, os.WEXITED | os.WNOWAIT)
        end_escaped(leader, tag, deadline=time.monotonic() + max(grace, 1.0))
    except OSError:  # the leader already reaped: nothing can be told apart
        return
