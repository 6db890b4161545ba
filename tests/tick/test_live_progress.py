"""Live progress: on a terminal (a real pty), one line per running attempt;
with -q the output stays plain lines."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from support import Project

GATED_WAITING = """
[[pipelines.default.stages]]
name = "research"
gate = true
worker = ["sh", "-c", "echo 'reading the sources'; n=0; \
while [ ! -e {go} ] && [ $n -lt 6000 ]; do sleep 0.05; n=$((n+1)); done"]
verifier = ["sh", "-c", "echo '{{\\"pass\\": true, \\"score\\": 0.9}}'"]
"""


def spawn_on_pty(project: Project, *args: str) -> tuple[subprocess.Popen[bytes], int]:
    master, slave = pty.openpty()
    env = project.process_env({"COLUMNS": "120", "LINES": "40", "TERM": "xterm"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=project.dir,
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    return proc, master


def read_until(master: int, seen: bytearray, wanted: bytes, proc: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + 60
    while wanted not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed the pty
                return wanted in seen
            if not chunk:
                return wanted in seen
            seen.extend(chunk)
        elif proc.poll() is not None:
            break
    return wanted in seen


def drain(master: int, seen: bytearray, proc: subprocess.Popen[bytes]) -> None:
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen.extend(chunk)
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(master)


def test_tick_on_a_terminal_shows_a_live_line_per_running_attempt(
    project: Project, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    # A failing hook: its error line (stderr) must get through the live display too.
    failing = '\n[[hooks]]\nname = "down"\non = ["awaiting_approval"]\ncommand = ["false"]\n'
    project.write_config(GATED_WAITING.format(go=go) + failing)
    assert project.cli("add", "t1", "--title", "live").exit_code == 0
    proc, master = spawn_on_pty(project, "tick")
    seen = bytearray()
    try:
        # The live line: task, stage, attempt, elapsed, and the worker's last line.
        assert read_until(master, seen, b"reading the sources", proc), seen.decode(errors="replace")
        text = seen.decode(errors="replace")
        line = next(x for x in text.replace("\r", "\n").splitlines() if "reading the sources" in x)
        assert "t1" in line and "research" in line and "attempt 1" in line and "0:0" in line
        go.touch()
        drain(master, seen, proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()  # reaped: no process outlives its test
    # 75: the `down` hook's delivery failed (try again later)
    assert proc.returncode == 75, seen.decode(errors="replace")
    text = seen.decode(errors="replace")
    assert "research:awaiting_approval" in text  # the plain lines still come
    assert "tick: 1 attempts" in text
    assert "Error: hook 'down' (awaiting_approval t1), try 1: exit 1" in text
    assert project.state("t1") == "research:awaiting_approval"


def test_quiet_tick_on_a_terminal_stays_plain(project: Project, tmp_path: Path) -> None:
    go = tmp_path / "go"
    go.touch()
    project.write_config(GATED_WAITING.format(go=go))
    assert project.cli("add", "t1", "--title", "plain").exit_code == 0
    proc, master = spawn_on_pty(project, "tick", "-q")
    seen = bytearray()
    drain(master, seen, proc)
    assert proc.returncode == 0
    text = seen.decode(errors="replace")
    assert "\x1b[" not in text  # no cursor movement, no colours
    assert "reading the sources" not in text
    assert "research:awaiting_approval" in text


# review finding: `live_progress` asks `sys.stdout.isatty()`, but Python sets
# sys.stdout to None when fd 1 is closed (a daemon or a supervisor started
# `orchestrator tick >&-`): the tick crashes with an AttributeError traceback
# and exit 1 before it claims anything. Before the split (3bd6828) such a tick
# ran and exited 0 (click.echo drops lines when there is no stdout).
def test_a_tick_with_no_stdout_at_all_still_runs(project: Project) -> None:
    assert project.cli("add", "t1", "--title", "T").exit_code == 0
    proc = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-m", "orchestrator", "tick"],
        check=False,
        cwd=project.dir,
        env=project.process_env(),
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert project.state("t1") == "research:awaiting_approval"
