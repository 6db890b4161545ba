"""A fork server for the tests' `orchestrator` processes.

The crash, sweep and soak lanes start thousands of short `orchestrator`
processes, and the end-to-end tests hundreds (`Project.run`); a fresh
interpreter spends far longer importing SQLAlchemy and the package than a
command spends working. So one server process imports them once, and each run
is a fork of it that then behaves as a real, separate process: its own pid
and session (as `start_new_session=True`), its own environment, working
folder and standard streams, default signal dispositions, and the normal
interpreter exit (atexit handlers, non-daemon threads joined, buffers
flushed). A kill, a SIGSTOP or an `os._exit` reaches it as it would reach
`python -m orchestrator`.

`orchestrator.testing` reads its fault variables at import, so each fork
reloads it (in place: code holding its functions sees the new values).

Server: `python forkserver.py SOCKET` prints `ready` once it listens, and
exits when its standard input closes (its test process is gone). For each
connection it forks a waiter, which forks the run and reports the run's pid,
then its exit status (negative: the signal that ended it, as `Popen`).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PRELOAD = (
    "sqlalchemy",
    "sqlalchemy.dialects.sqlite",
    "psycopg",
    "orchestrator.cli",
    "orchestrator.cli.ticking",
    "orchestrator.cli.tasks",
    "orchestrator.api.project",
    "orchestrator.api.ticking",
    "orchestrator.tick",
    "orchestrator.storage.db",
    "orchestrator.storage.repo",
    "orchestrator.storage.migrate",
)


# -- server ---------------------------------------------------------------------------


def _preload() -> None:
    import importlib

    for name in PRELOAD:  # psycopg may be missing; a moved module must fail loudly
        if name == "psycopg":
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
        else:
            importlib.import_module(name)


def _serve(path: str) -> dict[str, Any]:
    """Accept runs until stdin closes; return (in the forked run only) its request."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # waiters reap themselves
    print("ready", flush=True)
    while True:
        readable, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in readable:
            os._exit(0)
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            return _wait_for_run(conn)
        conn.close()


def _wait_for_run(conn: socket.socket) -> dict[str, Any]:
    """The waiter: fork the run, report its pid and then how it ended."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    request = json.loads(conn.makefile("r").readline())
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        # Lead a session of its own before anyone learns the pid, so a
        # `killpg(pid)` right after `pid` is known reaches the whole run.
        os.setsid()
        os.close(ready_r)
        os.write(ready_w, b".")
        os.close(ready_w)
        conn.close()
        return dict(request)
    os.close(ready_w)
    os.read(ready_r, 1)  # the run leads its session now (or died: EOF)
    os.close(ready_r)
    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    _, status = os.waitpid(pid, 0)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps({"returncode": code}).encode() + b"\n")
    os._exit(0)


def _become(request: dict[str, Any]) -> None:
    """Turn the fresh fork into the requested process."""
    import importlib

    os.chdir(request["cwd"])
    sys.path.insert(0, str(Path.cwd()))
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, (name, flags) in enumerate(
        [
            (request["stdin"], os.O_RDONLY),
            (request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
            (request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        ]
    ):
        target = os.open(name, flags, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own stdin
    sys.argv = ["orchestrator", *request["argv"]]
    import orchestrator.testing

    importlib.reload(orchestrator.testing)


def _run_forked(request: dict[str, Any]) -> int:
    _become(request)
    try:
        if request.get("entry") == "module":
            # As `python -m orchestrator`: the idle tick's answer first.
            from orchestrator.__main__ import main as module_main

            module_main()
        else:
            from orchestrator.cli import main

            main(request["argv"])
    except SystemExit as exc:
        code = exc.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    return 0


# -- client ---------------------------------------------------------------------------


class Forked:
    """A run started by the server: `pid`, `returncode`, `wait(timeout)`, like `Popen`."""

    def __init__(self, conn: socket.socket, args: list[str]) -> None:
        self.args = args
        self._conn = conn
        self._buffer = b""
        self.pid = int(self._message(None)["pid"])
        self.returncode: int | None = None

    def _message(self, timeout: float | None) -> dict[str, Any]:
        """The waiter's next line; TimeoutExpired when none comes within `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            readable, _, _ = select.select([self._conn], [], [], left)
            if not readable:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            chunk = self._conn.recv(4096)
            if not chunk:
                raise RuntimeError("the fork server's waiter died before reporting")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return dict(json.loads(line))

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = int(self._message(timeout)["returncode"])
            self._conn.close()
        return self.returncode

    def poll(self) -> int | None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.wait(0)
        return None


class ForkServer:
    """One server per test process, started on first use."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="orch-fork-")
        self.socket = str(Path(self._dir) / "s")
        self._proc = subprocess.Popen(
            [sys.executable, __file__, self.socket],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")},
        )
        assert self._proc.stdout is not None
        ready = self._proc.stdout.readline()
        assert ready.strip() == "ready", f"fork server did not start: {ready!r}"
        atexit.register(self.close)

    def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | str,
        env: Mapping[str, str],
        stdout: Path | str = os.devnull,
        stderr: Path | str = os.devnull,
        stdin: Path | str = os.devnull,
        entry: str = "cli",
    ) -> Forked:
        """Start `orchestrator ARGV` as a fork: `entry="cli"` enters the command
        line directly, `entry="module"` as `python -m orchestrator` does (the
        idle tick's answer first)."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.socket)
        request = {
            "argv": list(argv),
            "cwd": str(cwd),
            "env": dict(env),
            "stdin": str(stdin),
            "stdout": str(stdout),
            "stderr": str(stderr),
            "entry": entry,
        }
        conn.sendall(json.dumps(request).encode() + b"\n")
        return Forked(conn, [sys.executable, "-m", "orchestrator", *argv])

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            self._proc.wait(timeout=30)
        assert self._proc.stdout is not None
        self._proc.stdout.close()
        with contextlib.suppress(OSError):
            Path(self.socket).unlink()
            Path(self._dir).rmdir()


_SERVER: ForkServer | None = None
_LOCK = threading.Lock()


def server() -> ForkServer:
    global _SERVER  # noqa: PLW0603 - one server per test process
    with _LOCK:
        if _SERVER is None:
            _SERVER = ForkServer()
        return _SERVER


def enabled() -> bool:
    """Whether `orchestrator` runs are forks of the server (the default) or
    fresh interpreters (`ORCHESTRATOR_TEST_FRESH_PROCESSES=1`)."""
    return os.environ.get("ORCHESTRATOR_TEST_FRESH_PROCESSES", "") not in ("1", "true")


def can_fork(env: Mapping[str, str]) -> bool:
    """Whether a fork behaves as a fresh interpreter would under `env`: not
    when it sets what only an interpreter's start reads (`PYTHON*` such as
    PYTHONPROFILEIMPORTTIME, the locale that picks the streams' encoding,
    the dynamic loader's `LD_*`) differently from the environment the server
    started in (the test process's)."""
    started = os.environ
    return enabled() and not any(
        env.get(key) != started.get(key)
        for key in {*env, *started}
        if key.startswith(("PYTHON", "LD_", "LC_", "LANG"))
    )


def run(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str],
    timeout: float,
    input: str | None = None,
    entry: str = "cli",
) -> subprocess.CompletedProcess[str]:
    """`python -m orchestrator ARGV` as a fork, `input` on its standard input;
    its whole session is killed after `timeout` seconds (then TimeoutExpired)."""
    with tempfile.TemporaryDirectory(prefix="orch-run-") as folder:
        out, err = Path(folder) / "out", Path(folder) / "err"
        stdin: Path | str = os.devnull
        if input is not None:
            stdin = Path(folder) / "in"
            stdin.write_text(input)
        proc = server().spawn(
            argv, cwd=cwd, env=env, stdout=out, stderr=err, stdin=stdin, entry=entry
        )
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        return subprocess.CompletedProcess(
            proc.args,
            proc.wait(),
            out.read_text(errors="replace"),
            err.read_text(errors="replace"),
        )


if __name__ == "__main__":
    sys.path.pop(0)  # this folder; each run gets its cwd, as `python -m` would
    _preload()
    gc.freeze()  # the preloaded heap stays shared, and no run's exit walks it
    sys.exit(_run_forked(_serve(sys.argv[1])))
