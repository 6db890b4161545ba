"""Real tick processes killed, stopped and signalled while their workers run.

Every wait polls a file the fake agent writes or a database row, with a
deadline. Processes a failing test leaves behind are killed in `finally`.
"""

from __future__ import annotations

import json
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from e2e_support import (
    PASS,
    agent,
    attempts,
    execute,
    gone,
    halt_reason,
    kill_quietly,
    outcomes,
    read_pid,
    reap,
    records,
    stage,
    wait_for,
)
from support import Project, check_invariants

from orchestrator.locking import TickLock
from orchestrator.runner import pid_alive

# Signal timing and parallel starts: on one xdist worker with the other timing tests.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("timing")]


# A worker's long sleep outlasts any test, and PATIENCE is the safety net
# for a process that must end: what ended it is read from what it wrote
# (no `end` in its dump: killed in its sleep), never from a stopwatch.
LONG = "600"
PATIENCE = 300.0


def sleeping_stage(pidfile: Path, sleep: str = f"{LONG},0", *extra: str) -> str:
    """A stage whose first attempt sleeps (long) and whose later ones pass at
    once; each worker notes its start and end in `dumped(pidfile)`."""
    worker = agent("--pidfile", str(pidfile), "--dump", str(dumped(pidfile)), "--sleep", sleep)
    return stage("work", worker=[*worker, *extra], verifier=PASS)


def dumped(pidfile: Path) -> Path:
    return pidfile.with_suffix(".jsonl")


def cut_short(pidfile: Path) -> bool:
    """The first worker started and never reached its end."""
    return len(records(dumped(pidfile), "start")) >= 1 and not [
        r for r in records(dumped(pidfile), "end") if r["attempt"] == "1"
    ]


def wait_running(project: Project, pidfile: Path, slug: str = "t1") -> int:
    """Wait until the worker runs and the tick has noted its identity (the
    `worker.proc` file a later tick on this host reads to kill an orphan)."""
    pid = int(wait_for(lambda: read_pid(pidfile), what="the worker's pidfile"))

    def noted() -> bool:
        for proc in (project.dir / "state" / slug).glob("*/worker.proc"):
            try:
                if json.loads(proc.read_text())["pid"] == pid:
                    return True
            except (OSError, ValueError, KeyError):
                continue
        return False

    wait_for(noted, what="the worker's identity noted by the tick")
    return pid


def test_sigkilled_tick_on_this_host_is_recovered_at_once(project: Project, tmp_path: Path) -> None:
    pidfile = tmp_path / "worker.pid"
    project.write_config(sleeping_stage(pidfile), retry_interval=60, kill_grace_seconds=1)
    assert project.cli("add", "t1", "--title", "Killed").exit_code == 0
    first = project.popen("tick")
    worker = None
    try:
        worker = wait_running(project, pidfile)
        first.send_signal(signal.SIGKILL)
        assert reap(first).rc == -9
        assert pid_alive(worker)  # the orphan lives on, in its own session

        second = project.run("tick", timeout=30)  # the kernel freed the lock
        assert second.returncode == 0, second.stderr
        wait_for(lambda: gone(worker), timeout=5, what="the orphaned worker to die")
        rows = attempts(project, "t1")
        assert [a["outcome"] for a in rows] == ["crashed", "passed"]
        assert "tick process is gone" in rows[0]["error"]
        assert project.state("t1") == "complete"
        assert check_invariants(project.db_url, allow_running=False) == []
    finally:
        kill_quietly([first.pid, worker])


def test_lease_of_another_host_is_respected_until_it_expires(
    project: Project, tmp_path: Path
) -> None:
    pidfile = tmp_path / "worker.pid"
    project.write_config(sleeping_stage(pidfile), retry_interval=60, lease_seconds=4)
    assert project.cli("add", "t1", "--title", "Leased").exit_code == 0
    first = project.popen("tick")
    worker = None
    try:
        worker = wait_running(project, pidfile)
        first.send_signal(signal.SIGKILL)
        reap(first)
        # Pretend the attempt runs on another machine: only its lease can free it.
        assert execute(project, "UPDATE attempts SET host = 'elsewhere'") == 1
        [row] = attempts(project, "t1")
        expires = _aware(row["lease_expires_at"])

        assert project.cli("tick").exit_code == 0
        checked_at = datetime.now(UTC)
        assert checked_at < expires, "the tick ran too late to prove anything"
        assert outcomes(project, "t1") == [None]
        assert project.state("t1") == "work:running"

        wait_for(lambda: datetime.now(UTC) > expires, timeout=10, what="lease expiry")
        assert project.cli("tick").exit_code == 0
        rows = attempts(project, "t1")
        assert [a["outcome"] for a in rows] == ["crashed", "passed"]
        assert "lease expired" in rows[0]["error"]
        assert project.state("t1") == "complete"
        # Recorded for another host: never signalled from this one.
        assert pid_alive(worker)
        assert check_invariants(project.db_url, allow_running=False) == []
    finally:
        kill_quietly([first.pid, worker])


def _aware(value: object) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    assert isinstance(value, datetime)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


@pytest.mark.parametrize(
    ("sig", "code", "stubborn"),
    [(signal.SIGTERM, 143, False), (signal.SIGINT, 130, True)],
    ids=["sigterm", "sigint-stubborn-worker"],
)
def test_signalled_tick_interrupts_the_attempt(
    project: Project, tmp_path: Path, sig: signal.Signals, code: int, stubborn: bool
) -> None:
    pidfile, grandchild = tmp_path / "worker.pid", tmp_path / "grandchild.pid"
    extra = ["--grandchild", str(grandchild)] + (["--ignore-term"] if stubborn else [])
    project.write_config(
        sleeping_stage(pidfile, f"{LONG},0", *extra), retry_interval=60, kill_grace_seconds=1
    )
    assert project.cli("add", "t1", "--title", "Stopped").exit_code == 0
    tick = project.popen("tick")
    worker = None
    try:
        worker = wait_running(project, pidfile)
        wait_for(lambda: read_pid(grandchild), what="the grandchild")
        sent = time.monotonic()
        tick.send_signal(sig)
        done = reap(tick, timeout=PATIENCE, since=sent)
        assert done.rc == code, done.stderr
        print(f"{sig.name}: tick exited {done.elapsed:.2f}s after the signal")  # not asserted
        assert cut_short(pidfile)  # the signal ended the worker, not its sleep
        assert "Traceback" not in done.stderr
        assert gone(worker)
        assert gone(read_pid(grandchild))
        [row] = attempts(project, "t1")
        assert row["outcome"] == "interrupted"
        assert project.state("t1") == "work"
        lock = TickLock(project.dir / "orchestrator.lock")
        lock.acquire()  # released: taking it does not wait
        lock.release()
        assert project.query("SELECT exit_code FROM ticks") == [(code,)]

        again = project.run("tick")
        assert again.returncode == 0, again.stderr
        assert outcomes(project, "t1") == ["interrupted", "passed"]
        assert project.state("t1") == "complete"
        assert check_invariants(project.db_url, allow_running=False) == []
    finally:
        kill_quietly([tick.pid, worker, read_pid(grandchild)])


def test_max_interrupts_in_a_row_halt_the_task(project: Project, tmp_path: Path) -> None:
    pidfile = tmp_path / "worker.pid"
    project.write_config(
        sleeping_stage(pidfile, LONG), retry_interval=60, max_interrupts=2, kill_grace_seconds=1
    )
    assert project.cli("add", "t1", "--title", "Killed by an outer timeout").exit_code == 0
    for round_ in (1, 2):
        pidfile.unlink(missing_ok=True)
        tick = project.popen("tick")
        try:
            wait_for(lambda n=round_: len(attempts(project, "t1")) == n, what="the attempt")
            wait_running(project, pidfile)
            tick.send_signal(signal.SIGTERM)
            assert reap(tick, timeout=PATIENCE).rc == 143
        finally:
            kill_quietly([tick.pid, read_pid(pidfile)])
    assert outcomes(project, "t1") == ["interrupted", "interrupted"]
    assert project.state("t1") == "work:halted"
    assert halt_reason(project, "t1") == "interrupted"
    assert check_invariants(project.db_url, allow_running=False) == []


def test_halt_stops_a_running_attempt(project: Project, tmp_path: Path) -> None:
    pidfile = tmp_path / "worker.pid"
    project.write_config(sleeping_stage(pidfile, LONG), retry_interval=60, lease_seconds=3)
    assert project.cli("add", "t1", "--title", "Halted by a person").exit_code == 0
    tick = project.popen("tick")
    worker = None
    try:
        worker = wait_running(project, pidfile)
        halted_at = time.monotonic()
        result = project.cli("halt", "t1")
        assert result.exit_code == 0, result.output
        done = reap(tick, timeout=PATIENCE, since=halted_at)
        assert done.rc == 0, done.stderr
        print(f"halt: the tick ended {done.elapsed:.2f}s later")  # not asserted
        assert cut_short(pidfile)  # the halt ended the worker, not its sleep
        assert gone(worker)
        [row] = attempts(project, "t1")
        assert row["outcome"] == "interrupted"
        assert project.state("t1") == "work:halted"
        assert halt_reason(project, "t1") == "manual"
        assert check_invariants(project.db_url, allow_running=False) == []
    finally:
        kill_quietly([tick.pid, worker])


def test_run_ticks_repeatedly_and_exits_cleanly_on_sigterm(project: Project, backend: str) -> None:
    project.write_config(stage("only", worker=["true"], verifier=PASS))
    assert project.cli("add", "t1", "--title", "First").exit_code == 0
    loop = project.popen("run", "--interval", "0.2")
    try:
        wait_for(lambda: project.state("t1") == "complete", what="the first tick")
        assert project.cli("add", "t2", "--title", "Second").exit_code == 0
        wait_for(lambda: project.state("t2") == "complete", what="a later tick")
        # A few idle ticks: each moves this host's idle row forward.
        ends: set[object] = set()

        def idle_ticks() -> bool:
            ends.add(project.query("SELECT max(finished_at) FROM ticks")[0][0])
            return len(ends) > 5

        wait_for(idle_ticks, what="a few idle ticks")
        if backend == "pg":  # each tick's engine is disposed: no connections pile up
            [(held,)] = project.query(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            assert held <= 2
        sent = time.monotonic()
        loop.send_signal(signal.SIGTERM)
        done = reap(loop, timeout=PATIENCE, since=sent)
        assert done.rc == 0, done.stderr
        print(f"run: exited {done.elapsed:.2f}s after SIGTERM")  # not asserted
        assert done.stderr == ""
        assert check_invariants(project.db_url, allow_running=False) == []
    finally:
        kill_quietly([loop.pid])
