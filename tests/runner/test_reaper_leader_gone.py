"""An escaped process whose main thread ended (`pthread_exit`) shows as a
zombie in /proc/PID/stat while its other threads run on: the reaping pass
must not take it for dead (real tick through the CLI)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from e2e.e2e_support import PASS, stage
from support import Project

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")

# The main thread leaves (pthread_exit), a second thread sleeps on.
HEADLESS = r"""
#include <pthread.h>
#include <unistd.h>
static void *sleeper(void *arg) { (void)arg; sleep(60); return 0; }
int main(void) { pthread_t t; pthread_create(&t, 0, sleeper, 0); pthread_exit(0); }
"""


def running(pid: int) -> bool:
    """Whether `pid` has a thread that is not a zombie."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        states = [(task / "stat").read_text().rsplit(")", 1)[1].split()[0] for task in tasks]
    except OSError:
        return False
    return any(state not in ("Z", "X") for state in states)


@pytest.mark.parametrize("jobs", ["1", "2"])  # inline; a pool thread (found by its tag)
def test_an_escaped_process_whose_main_thread_ended_is_ended(project: Project, jobs: str) -> None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        if os.environ.get("CI"):
            pytest.fail("no C compiler (cc or gcc): CI must run this test")
        pytest.skip("no C compiler")
    source, program = project.dir / "headless.c", project.dir / "headless"
    source.write_text(HEADLESS)
    subprocess.run([compiler, "-pthread", "-o", str(program), str(source)], check=True)
    pidfile = project.dir / "headless.pid"
    worker = f"setsid {program} & echo $! > {pidfile}; sleep 0.5"
    project.write_config(stage("work", worker=["sh", "-c", worker], verifier=PASS))
    assert project.cli("add", "t1", "--title", "headless").exit_code == 0
    try:
        assert project.cli("tick", "--jobs", jobs).exit_code == 0
        pid = int(pidfile.read_text())
        time.sleep(0.2)
        assert not running(pid)
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
