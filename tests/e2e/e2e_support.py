"""Helpers for the end-to-end tests: stage TOML, the fake agent, waiting."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from support import FAKES, Project

from orchestrator.runner import pid_alive

AGENT = FAKES / "agent.py"


def agent(*args: str) -> list[str]:
    """argv for the fake worker/verifier (tests/fakes/agent.py)."""
    return [sys.executable, str(AGENT), *args]


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)  # strings, numbers and lists of strings read the same in TOML


def stage(
    name: str,
    *,
    worker: list[str] | None = None,
    verifier: list[str] | None = None,
    pipeline: str = "default",
    **keys: Any,
) -> str:
    lines = [f"[[pipelines.{pipeline}.stages]]", f"name = {_toml(name)}"]
    if worker is not None:
        lines.append(f"worker = {_toml(worker)}")
    if verifier is not None:
        lines.append(f"verifier = {_toml(verifier)}")
    lines += [f"{key} = {_toml(value)}" for key, value in keys.items()]
    return "\n".join(lines) + "\n\n"


PASS = agent("--pass", "--score", "1.0")


def wait_for(predicate: Callable[[], Any], timeout: float = 120.0, what: str = "") -> Any:
    """Poll until `predicate()` is truthy; fail the test after `timeout` seconds
    (a safety net against a hang: generous, since a loaded machine is slow)."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.1)


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def records(path: Path, phase: str | None = None) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in out if phase is None or r.get("phase") == phase]


def attempts(project: Project, slug: str) -> list[dict[str, Any]]:
    rows = project.query(
        "SELECT a.stage, a.number, a.outcome, a.score, a.error, a.hint, a.next_hint, "
        "a.finished_at, a.pid, a.lease_expires_at, a.id "
        "FROM attempts a JOIN tasks t ON t.id = a.task_id WHERE t.slug = :s ORDER BY a.id",
        s=slug,
    )
    keys = [
        "stage",
        "number",
        "outcome",
        "score",
        "error",
        "hint",
        "next_hint",
        "finished_at",
        "pid",
        "lease_expires_at",
        "id",
    ]
    return [dict(zip(keys, row, strict=True)) for row in rows]


def execute(project: Project, sql: str, **params: Any) -> int:
    """Run one write statement and commit it; returns the row count."""
    engine = create_engine(project.db_url)
    try:
        with engine.begin() as conn:
            return int(conn.execute(text(sql), params).rowcount)
    finally:
        engine.dispose()


def outcomes(project: Project, slug: str) -> list[str | None]:
    return [a["outcome"] for a in attempts(project, slug)]


def halt_reason(project: Project, slug: str) -> str | None:
    return project.query("SELECT halt_reason FROM tasks WHERE slug = :s", s=slug)[0][0]


def gone(pid: int | None) -> bool:
    return pid is None or not pid_alive(pid)


@dataclass
class Finished:
    rc: int
    stdout: str
    stderr: str
    elapsed: float  # from start (or from `since`) to exit, as seen by the test
    max_rss_mb: float  # the process's own peak resident set (wait4)


def reap(
    proc: subprocess.Popen[str], timeout: float = 120.0, since: float | None = None
) -> Finished:
    """Wait for a tick started with `Project.popen`, with a deadline, and take its
    resource usage from wait4 (ru_maxrss is KiB on Linux, bytes on macOS)."""
    start = time.monotonic() if since is None else since
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            kill_quietly([proc.pid])
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise AssertionError(f"process {proc.args} did not exit within {timeout}s")
        time.sleep(0.01)
    elapsed = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    stdout = proc.stdout.read() if proc.stdout else ""
    stderr = proc.stderr.read() if proc.stderr else ""
    for stream in (proc.stdout, proc.stderr):
        if stream:
            stream.close()
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024
    return Finished(proc.returncode, stdout, stderr, elapsed, usage.ru_maxrss / scale)


def reap_all(
    procs: list[subprocess.Popen[str]], since: Callable[[], float], timeout: float = 120.0
) -> list[Finished]:
    """`reap` for many processes at once: each exit time is taken when that
    process ends, not when the caller gets round to it. `since()` gives the
    start of the measurement (read after the processes end)."""
    deadline = time.monotonic() + timeout
    ended: dict[int, tuple[int, float, float]] = {}
    while len(ended) < len(procs):
        for index, proc in enumerate(procs):
            if index in ended:
                continue
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                ended[index] = (status, time.monotonic(), usage.ru_maxrss)
        if time.monotonic() > deadline:
            kill_quietly([p.pid for p in procs])
            raise AssertionError(f"{len(procs) - len(ended)} processes still running")
        time.sleep(0.005)
    start = since()
    out = []
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024
    for index, proc in enumerate(procs):
        status, at, rss = ended[index]
        proc.returncode = os.waitstatus_to_exitcode(status)
        stdout = proc.stdout.read() if proc.stdout else ""
        stderr = proc.stderr.read() if proc.stderr else ""
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()
        out.append(Finished(proc.returncode, stdout, stderr, at - start, rss / scale))
    return out


def _ours(pid: int) -> bool:
    """Only processes the tests started (the fake agent, its grandchild, a tick)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return any(mark in cmdline for mark in (b"agent.py", b"time.sleep(120)", b"orchestrator"))


def kill_quietly(pids: Iterable[int | None]) -> None:
    """Test cleanup: SIGKILL what a failed test may have left behind (ours only)."""
    for pid in pids:
        if pid is None or not _ours(pid):
            continue
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
