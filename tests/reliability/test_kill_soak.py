"""The kill -9 soak: 200 ticks SIGKILLed at a uniformly random moment.

One project with many tasks (two ungated stages) is reused across the
iterations. Each iteration: the worker sleeps a random 0-0.3 s; a real tick
(`--max-tasks 1`) starts and is SIGKILLed at a uniformly random moment in
[0, T], where T is the measured time of a tick that runs one attempt (at
least 0.6 s): its pid only, its whole session (process group), or its
session and the worker's group too. Then a recovery tick (`--max-seconds 0`:
it recovers and claims nothing) runs and is timed; the invariants
must hold with no attempt left open, every transition committed before the
kill is still there, none is written twice, and no command an attempt
started (worker or its child) survives the recovery. At the end a few clean ticks
finish every task: all reach `complete`.

`ORCHESTRATOR_SOAK_ITERATIONS` and `ORCHESTRATOR_SOAK_SEED` override the
defaults (200, random); the seed is in every failure message.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import forkserver
import pytest
from reliability_report import SOAK, ProjectFactory, ReliabilityReport
from reliability_support import (
    PASS_VERDICT,
    agent,
    audit_transitions,
    query,
    run,
    transition_log,
    violations,
    wait_for_dead_sessions,
)
from support import Project

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

ITERATIONS = int(os.environ.get("ORCHESTRATOR_SOAK_ITERATIONS", "200"))
TASKS = max(10, ITERATIONS // 3)
# A fork starts in milliseconds, a fresh interpreter in a few tenths of a second.
KILL_WINDOW = 0.3 if forkserver.enabled() else 0.6
MODES = ("tick", "session", "session+worker")
Process = forkserver.Forked | subprocess.Popen[bytes]


# Outcomes that spend nothing of `max_attempts` (nor count as the task's).
NOT_CHARGED = {"interrupted", "host_error", "database_error", "backoff"}


def started_dir(pidfile: Path) -> Path:
    """Where each attempt's worker notes, as its first act, that it started:
    `<task>-<stage>-<attempt>`, written by a shell before the agent runs."""
    return pidfile.with_name("started")


def stages(pidfile: Path, sleep: float) -> str:
    # The shell writes its note within a millisecond or so of its exec; the
    # tick notes a command as started only once it ran 10 ms (or ended), so a
    # worker the soak saw no note of was never judged started by the tick.
    note = started_dir(pidfile) / "{task}-{stage}-{attempt}"
    worker = [
        "sh",
        "-c",
        ': > "$0"; exec "$@"',
        str(note),
        *agent("--pidfile", str(pidfile), "--sleep", f"{sleep:.3f}"),
    ]
    return "".join(
        f"""
[[pipelines.default.stages]]
name = "{name}"
worker = {json.dumps(worker)}
verifier = {json.dumps(PASS_VERDICT)}
max_attempts = 1000
"""
        for name in ("a", "b")
    )


def configure(project: Project, pidfile: Path, sleep: float) -> None:
    project.write_config(stages(pidfile, sleep), kill_grace_seconds=1, retry_interval=0)


def surviving_commands(folder: Path) -> list[int]:
    """Live processes started by an attempt of the project in `folder`: they
    carry the attempt's process tag and its workspace in their environment."""
    workspace = f"ORCHESTRATOR_WORKSPACE={folder}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_bytes().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if b"ORCHESTRATOR_PROCESS_TAG=" in environ and workspace in environ and state != b"Z":
            found.append(int(entry.name))
    return found


def is_agent(pid: int) -> bool:
    try:
        return b"agent.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def start_tick(project: Project) -> Process:
    """A tick of two tasks at once (`--jobs 2`, where attempts killed before
    their spawn were found) in a session of its own, its output discarded."""
    argv = ["tick", "--jobs", "2", "--max-tasks", "2", "-q"]
    if forkserver.enabled():
        return forkserver.server().spawn(argv, cwd=project.dir, env=project.process_env())
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *argv],
        cwd=project.dir,
        env=project.process_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def kill(proc: Process, mode: str, pidfile: Path) -> None:
    with contextlib.suppress(ProcessLookupError):
        if mode == "tick":
            os.kill(proc.pid, signal.SIGKILL)
        else:
            os.killpg(proc.pid, signal.SIGKILL)  # the tick's session: start_new_session
    if mode == "session+worker":
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid, pgid = (int(x) for x in pidfile.read_text().split()[:2])
            if is_agent(pid):
                os.killpg(pgid, signal.SIGKILL)


def test_kill_soak(
    reliability_backend: str, new_project: ProjectFactory, report: ReliabilityReport, tmp_path: Path
) -> None:
    seed = int(os.environ.get("ORCHESTRATOR_SOAK_SEED", "0")) or random.randrange(1, 2**31)
    rng = random.Random(seed)
    report.soak_seed = seed
    pidfile = tmp_path / "worker.pid"
    project = new_project(stages(pidfile, 0.0), name="soak")
    configure(project, pidfile, 0.0)
    lines = "".join(f'{{"slug": "t{i:03d}", "title": "soak {i}"}}\n' for i in range(TASKS))
    (tmp_path / "tasks.jsonl").write_text(lines)
    assert project.cli("add", "--from", str(tmp_path / "tasks.jsonl")).exit_code == 0

    # The kill window spans a whole tick that runs one attempt, as measured
    # here (at least KILL_WINDOW): on a loaded machine start-up alone can
    # take 0.6 s, and a fixed window would then kill almost no attempt.
    samples = []
    for _ in range(3):
        configure(project, pidfile, 0.15)
        clock = time.monotonic()
        assert run(project, "tick", "--jobs", "2", "--max-tasks", "2", "-q").returncode == 0
        samples.append(time.monotonic() - clock)
    window = max(KILL_WINDOW, sorted(samples)[1])
    report.soak_window = window

    started_dir(pidfile).mkdir()
    failures: list[str] = []
    for iteration in range(ITERATIONS):
        configure(project, pidfile, rng.uniform(0.0, 0.3))
        pidfile.unlink(missing_ok=True)
        before = set(transition_log(project.db_url))
        last_attempt = query(project.db_url, "SELECT coalesce(max(id), 0) FROM attempts")[0][0]
        kill_at = rng.uniform(0.0, window)
        mode = rng.choice(MODES)
        proc = start_tick(project)
        started = time.monotonic()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=kill_at)
        finished_first = proc.returncode is not None
        if not finished_first:
            kill(proc, mode, pidfile)
        proc.wait(timeout=30)
        key = "finished first" if finished_first else mode
        report.soak_modes[key] = report.soak_modes.get(key, 0) + 1

        wait_for_dead_sessions(project.db_url)
        clock = time.monotonic()
        recovery = run(project, "tick", "--max-seconds", "0", "-q", timeout=60)
        report.soak_recovery_seconds.append(time.monotonic() - clock)
        report.soak_iterations += 1

        where = (
            f"iteration {iteration} (seed {seed}, kill at {kill_at:.3f}s by {key}, "
            f"rc {proc.returncode} after {time.monotonic() - started:.2f}s)"
        )
        problems = [f"recovery tick exit {recovery.returncode}: {recovery.stderr}"] * (
            recovery.returncode != 0
        )
        problems += violations(project.db_url, allow_running=False)
        after = set(transition_log(project.db_url))
        missing = before - after
        audit = audit_transitions(project.db_url)
        report.soak_lost += len(missing) + len(audit.lost)
        report.soak_duplicated += len(audit.duplicated)
        left = query(project.db_url, "SELECT count(*) FROM attempts WHERE finished_at IS NULL")
        report.soak_left_running += left[0][0]
        # Recovery killed what the dead tick started (workers and their
        # children), noted or not: nothing of an attempt may run on.
        survivors = surviving_commands(project.dir)
        report.soak_survivors += len(survivors)
        if survivors:
            problems.append(f"{len(survivors)} commands survived recovery: {survivors}")
        if missing:
            problems.append(f"{len(missing)} committed transitions lost: {sorted(missing)[:3]}")
        # The dead tick's row is closed by the recovery tick (issue 22, 14).
        unclosed = query(project.db_url, "SELECT count(*) FROM ticks WHERE exit_code IS NULL")
        if unclosed[0][0]:
            problems.append(f"{unclosed[0][0]} tick rows left without an exit status")
        # An attempt whose worker never started is not the task's fault: it
        # must be closed with an outcome that charges nothing (issue 22, 12).
        for slug, stage, number, outcome in query(
            project.db_url,
            "SELECT t.slug, a.stage, a.number, a.outcome FROM attempts a "
            "JOIN tasks t ON t.id = a.task_id WHERE a.id > :last ORDER BY a.id",
            last=last_attempt,
        ):
            if (started_dir(pidfile) / f"{slug}-{stage}-{number}").exists():
                continue
            report.soak_never_started += 1
            if outcome not in NOT_CHARGED:
                report.soak_never_started_charged += 1
                problems.append(f"{slug} attempt {number} at {stage}: never started, {outcome}")
        report.count(SOAK, not problems)
        report.soak_recovered += not problems
        if problems:
            failures.append(f"{where}: " + "; ".join(problems))
            if len(failures) >= 5:
                break

    crashed = query(project.db_url, "SELECT count(*) FROM attempts WHERE outcome = 'crashed'")
    report.soak_crashed_attempts = crashed[0][0]
    assert failures == [], "\n".join(failures)

    # Every task still finishes: nothing was lost for good.
    configure(project, pidfile, 0.0)
    for _ in range(6):
        if query(project.db_url, "SELECT count(*) FROM tasks WHERE status <> 'complete'")[0][0]:
            drained = run(project, "tick", "--jobs", "2", "-q", timeout=300)
            assert drained.returncode == 0, drained.stderr
    states = query(project.db_url, "SELECT status, count(*) FROM tasks GROUP BY status")
    assert states == [("complete", TASKS)], f"seed {seed}: {states}"
    assert violations(project.db_url, allow_running=False) == []


# review finding: the fork server reports a run's pid right after fork, before
# the run calls os.setsid() (`_become`), so for a moment the pid is no process
# group: `kill(proc, "session...")` then meets ProcessLookupError, which it
# suppresses, and the soak counts a kill that killed nothing (32 of 100 missed
# when killed at once on a 2-core machine; under load the gap grows). Popen
# with start_new_session=True returns only after the child's setsid. Fix: the
# run reports (e.g. a byte on a pipe to the waiter) once it called setsid, and
# the waiter sends the pid only then.
def test_a_forked_run_leads_its_own_session_once_its_pid_is_known(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    # The run opens a FIFO no one writes as its stdin, so it blocks there,
    # alive, however late the kill comes: a run that had already ended (a
    # quick `--help` on a loaded machine) would look "not yet a group".
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)
    not_yet = 0
    for _ in range(40):
        proc = forkserver.server().spawn(["verdict"], cwd=tmp_path, env=env, stdin=fifo)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            not_yet += 1
        proc.wait(timeout=30)
    assert not_yet == 0, f"{not_yet} of 40 runs were not yet a process group"
