"""Real tick processes side by side, and the limits of one tick: the host lock
under a crowd, --jobs, timeouts with a grandchild on the pipe, huge output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from e2e_support import (
    PASS,
    agent,
    attempts,
    gone,
    kill_quietly,
    outcomes,
    read_pid,
    reap,
    records,
    stage,
    wait_for,
)
from support import Project, check_invariants

# Signal timing and parallel starts: on one xdist worker with the other timing tests.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("timing")]

# Says it is ready (a file named by its pid in READY), waits on a barrier
# file, then runs `python -m orchestrator ARGS` unchanged: nothing is
# imported before the release, so each process pays its full start.
LAUNCHER = """
import os, sys, time
ready, barrier = sys.argv[1], sys.argv[2]
open(os.path.join(ready, str(os.getpid())), "w").close()
while not os.path.exists(barrier):
    time.sleep(0.002)
import runpy
sys.argv = ["orchestrator", *sys.argv[3:]]
runpy.run_module("orchestrator", run_name="__main__", alter_sys=True)
"""

# A safety net for a test that would otherwise hang, never a bound on speed:
# a loaded 2-core machine may take long, and the assertions below are causal.
PATIENCE = 600.0


@pytest.fixture
def backend() -> str:
    """The crowd tests are about one host's lock and SQLite's single writer."""
    return "sqlite"


def test_sixteen_ticks_at_once(project: Project, tmp_path: Path) -> None:
    """Sixteen ticks released at once: one wins the host lock, the fifteen
    others give up (75) while the winner is still held inside its workers,
    and `approve` commits while the winner is held there too. Neither is
    timed: the winner cannot end before the test writes the go-file, and the
    test writes it only after the losers and `approve` are done, so a loser
    or an `approve` that waited on the winner would hang (PATIENCE fails it)."""
    dump, finish = tmp_path / "work.jsonl", tmp_path / "finish"
    project.write_config(
        stage("gate", pipeline="gated", worker=["true"], verifier=PASS, gate=True)
        + stage(
            "work",
            worker=agent(
                "--dump", str(dump), "--wait-file", str(finish), "--wait-limit", str(PATIENCE)
            ),
            verifier=PASS,
        ),
        retry_interval=60,
    )
    assert project.cli("add", "g1", "--title", "At a gate", "--pipeline", "gated").exit_code == 0
    assert project.cli("tick").exit_code == 0
    assert project.state("g1") == "gate:awaiting_approval"
    for n in range(4):
        assert project.cli("add", f"w{n}", "--title", f"Work {n}").exit_code == 0

    ready, barrier = tmp_path / "ready", tmp_path / "go"
    ready.mkdir()
    procs: list[subprocess.Popen[str]] = []
    try:
        for n in range(16):
            quiet = ["-q"] if n % 2 else []
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        LAUNCHER,
                        str(ready),
                        str(barrier),
                        *("tick", "--jobs", "4", *quiet),
                    ],
                    cwd=project.dir,
                    env=project.process_env(),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    start_new_session=True,
                )
            )
        wait_for(
            lambda: len(list(ready.iterdir())) == 16, timeout=PATIENCE, what="16 at the barrier"
        )
        barrier.touch()

        # The losers give up while the winner is held in its workers.
        wait_for(
            lambda: len(records(dump, "start")) == 4, timeout=PATIENCE, what="the four workers"
        )
        wait_for(
            lambda: sum(p.poll() is not None for p in procs) == 15,
            timeout=PATIENCE,
            what="fifteen ticks to give up",
        )
        [winner] = [p for p in procs if p.poll() is None]
        losers = {n: p for n, p in enumerate(procs) if p is not winner}

        # A human command is not held up by the tick: it commits while the
        # winner's four attempts are still open and its workers still wait.
        approve = project.run("approve", "g1", timeout=PATIENCE)
        assert approve.returncode == 0, approve.stderr
        assert project.state("g1") == "gate:approved"
        assert not finish.exists() and records(dump, "end") == []
        open_attempts = project.query("SELECT count(*) FROM attempts WHERE finished_at IS NULL")
        assert open_attempts == [(4,)]
        assert winner.poll() is None

        finish.touch()
        out, err = winner.communicate(timeout=PATIENCE)
        assert winner.returncode == 0, err
    finally:
        kill_quietly([p.pid for p in procs])

    for n, loser in losers.items():
        out, err = loser.communicate(timeout=PATIENCE)
        assert loser.returncode == 75, (n, loser.returncode, err)
        assert out == ""
        if n % 2:
            assert err == ""  # -q: silent for cron
        else:
            [line] = err.splitlines()
            assert "another tick holds the lock" in line
            assert f"pid {winner.pid} on " in line

    starts = records(dump, "start")
    assert sorted(r["task"] for r in starts) == ["w0", "w1", "w2", "w3"]
    assert len({r["pid"] for r in starts}) == 4
    for n in range(4):
        assert outcomes(project, f"w{n}") == ["passed"]
        assert project.state(f"w{n}") == "complete"
    # approved meanwhile: the winner moved it on when its attempts ended
    assert project.state("g1") == "complete"
    assert project.counts()["ticks"] == 2  # the setup tick and the winner
    assert check_invariants(project.db_url, allow_running=False) == []


def test_jobs_run_attempts_side_by_side(project: Project, tmp_path: Path) -> None:
    dump = tmp_path / "work.jsonl"
    project.write_config(
        stage("work", worker=agent("--dump", str(dump), "--sleep", "1"), verifier=PASS),
        retry_interval=60,
    )
    for slug in ("a", "b"):
        assert project.cli("add", slug, "--title", slug).exit_code == 0
    done = project.run("tick", "--jobs", "2")
    assert done.returncode == 0, done.stderr
    ends = {r["task"]: r for r in records(dump, "end")}
    assert set(ends) == {"a", "b"}
    # both were running at once: each started before the other ended
    assert ends["a"]["started"] < ends["b"]["t"]
    assert ends["b"]["started"] < ends["a"]["t"]
    assert check_invariants(project.db_url, allow_running=False) == []


def test_timeout_kills_the_group_even_with_a_grandchild_on_the_pipe(
    project: Project, tmp_path: Path
) -> None:
    """Not timed: the worker would sleep far past any test's patience, so a
    tick that ends at all, with the worker's end never written and both
    processes gone, was ended by the timeout and not by the sleep."""
    pidfile, grandchild = tmp_path / "worker.pid", tmp_path / "grandchild.pid"
    dump = tmp_path / "worker.jsonl"
    project.write_config(
        stage(
            "work",
            worker=agent(
                *("--pidfile", str(pidfile), "--grandchild", str(grandchild)),
                *("--dump", str(dump), "--sleep", str(10 * PATIENCE)),
            ),
            verifier=agent("--touch", str(tmp_path / "verifier-ran"), "--pass"),
            timeout_seconds=1,
        ),
        retry_interval=60,
        kill_grace_seconds=1,
    )
    assert project.cli("add", "t1", "--title", "Slow").exit_code == 0
    tick = project.popen("tick")
    try:
        done = reap(tick, timeout=PATIENCE)
        assert done.rc == 0, done.stderr
        print(f"tick with a 1 s timeout took {done.elapsed:.2f}s")  # for the log, not asserted
        assert len(records(dump, "start")) == 1
        assert records(dump, "end") == []  # killed in its sleep, never waited out
        assert gone(read_pid(pidfile))
        assert gone(read_pid(grandchild))
        [row] = attempts(project, "t1")
        assert row["outcome"] == "timeout"
        assert "timed out" in row["error"]
        assert not (tmp_path / "verifier-ran").exists()
        assert project.state("t1") == "work"
        assert check_invariants(project.db_url, allow_running=False) == []
    finally:
        kill_quietly([tick.pid, read_pid(pidfile), read_pid(grandchild)])


def test_fifty_megabytes_before_the_verdict(project: Project) -> None:
    cap = 1_048_576
    project.write_config(
        stage(
            "work",
            worker=["true"],
            verifier=agent("--noise", "50000000", "--pass", "--score", "0.6"),
        ),
        output_cap_bytes=cap,
    )
    assert project.cli("add", "t1", "--title", "Chatty").exit_code == 0
    # The tick runs under a small parent that reports its children's peak
    # RSS. Measured straight from pytest, it would be pytest's own: a child
    # started with vfork inherits the parent's high-water mark until it execs.
    measure = (
        "import resource, subprocess, sys; "
        "rc = subprocess.run(sys.argv[1:]).returncode; "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
        "sys.exit(rc)"
    )
    done = subprocess.run(
        [sys.executable, "-c", measure, sys.executable, "-m", "orchestrator", "tick"],
        cwd=project.dir,
        env=project.process_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024
    max_rss_mb = int(done.stderr.strip().splitlines()[-1]) / scale
    [row] = attempts(project, "t1")
    assert (row["outcome"], row["score"]) == ("passed", 0.6)
    stored = project.dir / "state" / "t1" / "work-001" / "verifier.out"
    assert cap - 1024 < stored.stat().st_size <= cap + 200  # head + tail + the omission marker
    assert "bytes omitted" in stored.read_text()
    print(f"tick peak RSS with 50 MB of verifier output: {max_rss_mb:.0f} MB")
    assert max_rss_mb < 200, f"tick peak RSS {max_rss_mb:.0f} MB"
    assert check_invariants(project.db_url, allow_running=False) == []


def test_no_process_of_a_finished_tick_is_left(project: Project, tmp_path: Path) -> None:
    """A worker that backgrounds a sleeper and exits 0: the sweep at the end of
    the run takes the sleeper too, so nothing of the attempt outlives it."""
    grandchild = tmp_path / "grandchild.pid"
    project.write_config(
        stage("work", worker=agent("--grandchild", str(grandchild)), verifier=PASS)
    )
    assert project.cli("add", "t1", "--title", "Leaves a child").exit_code == 0
    try:
        done = project.run("tick")
        assert done.returncode == 0, done.stderr
        assert outcomes(project, "t1") == ["passed"]
        wait_for(lambda: gone(read_pid(grandchild)), timeout=5, what="the grandchild to die")
    finally:
        kill_quietly([read_pid(grandchild)])
    assert check_invariants(project.db_url, allow_running=False) == []
