"""An attempt's descendants end with the attempt (issue #35, item 2).

Real `orchestrator tick` processes run a worker and a verifier whose
children escape the command's process group and session: by `setsid`, a
double fork, `nohup`, and `env -i` + `setsid` (no process tag left). None
may outlive the command that started it: the worker's are gone before the
verifier runs (the verifier checks, and fails the attempt otherwise), the
verifier's before the verdict is recorded (a tick that dies right there
leaves none), with and without the sandbox, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_support import PASS, attempts, stage
from support import FAKES, Project

from orchestrator.features.sandbox.bwrap import bwrap_program
from orchestrator.runner import pid_alive

pytestmark = [pytest.mark.e2e]

ESCAPES = FAKES / "escapes.py"
KINDS = ("setsid", "double", "nohup", "envi")
# The sandbox hides the home and /tmp: the tests' Python and venv are mapped.
MAPPED = [os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix), str(FAKES)]


def marked(marker: str) -> list[int]:
    """Live processes whose command line holds `marker` (whatever their environment)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


@pytest.fixture
def marker() -> Iterator[str]:
    mark = f"escaped-{uuid.uuid4().hex[:12]}"
    try:
        yield mark
    finally:  # a failing run leaves them: never for the next test
        for pid in marked(mark):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture(params=["host", "bwrap"])
def sandbox(request: pytest.FixtureRequest) -> str:
    if request.param == "bwrap" and bwrap_program() is None and not os.environ.get("CI"):
        pytest.skip("bubblewrap (bwrap) is not installed")
    return str(request.param)


def configure(project: Project, marker: str, sandbox: str) -> None:
    keys: dict[str, object] = {}
    if sandbox == "bwrap":
        keys = {"sandbox": "bwrap", "sandbox_ro": MAPPED}
    escapes = [sys.executable, str(ESCAPES), "run"]
    project.write_config(
        stage(
            "work",
            worker=[*escapes, "worker", marker],
            verifier=[*escapes, "verifier", marker],
            **keys,
        ),
        env_deny=[],
    )


def escaped(project: Project, role: str) -> list[Path]:
    folder = project.dir / "tasks" / "t1" / ".escaped"
    return [folder / f"{role}-{kind}" for kind in KINDS]


def test_no_escaped_child_outlives_its_command(project: Project, marker: str, sandbox: str) -> None:
    configure(project, marker, sandbox)
    project.run("add", "t1", "--title", "escapes")
    done = project.run("tick", "--max-tasks", "1", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    # Every escape happened, in both commands.
    assert all(file.exists() for role in ("worker", "verifier") for file in escaped(project, role))
    [attempt] = attempts(project, "t1")
    # The verifier ran after the worker's escaped children had ended.
    assert attempt["outcome"] == "passed", attempt
    assert marked(marker) == []  # nor do the verifier's live on
    assert (project.dir / "tasks" / "t1" / "feature.txt").read_text() == "good\n"


def test_the_verifiers_escaped_children_end_before_the_verdict_is_recorded(
    project: Project, marker: str, sandbox: str
) -> None:
    configure(project, marker, sandbox)
    project.run("add", "t1", "--title", "escapes")
    # The tick dies (as by SIGKILL) where the verdict would be recorded:
    # what the verifier left must be gone already, with no later tick's help.
    done = project.run(
        "tick",
        "--max-tasks",
        "1",
        timeout=120,
        extra_env={"ORCHESTRATOR_TEST_FAULT": "before_record"},
    )
    assert done.returncode == 137, done.stdout + done.stderr
    assert all(file.exists() for file in escaped(project, "verifier"))
    assert marked(marker) == []


def test_with_jobs_an_attempts_reaping_spares_another_running_attempt(
    project: Project, marker: str, tmp_path: Path
) -> None:
    """t1's worker ends (its escaped child with it) while t2's worker runs:
    t2's own escaped child, tagged as t2's, lives on until t2's worker ends."""
    shared = tmp_path / "shared"
    shared.mkdir()
    worker = [sys.executable, str(ESCAPES), "jobs", "{task}", marker, str(shared)]
    project.write_config(stage("work", worker=worker, verifier=PASS), env_deny=[])
    project.run("add", "t1", "--title", "first")
    project.run("add", "t2", "--title", "second")
    done = project.run("tick", "--jobs", "2", "--max-tasks", "2", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (shared / "t2-saw").read_text() == "kept\n"
    assert [a["outcome"] for a in attempts(project, "t1") + attempts(project, "t2")] == [
        "passed",
        "passed",
    ]
    assert marked(marker) == []
