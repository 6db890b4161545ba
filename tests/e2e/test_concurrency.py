"""Real tick processes side by side, and the limits of one tick: the host lock
under a crowd, --jobs, timeouts with a grandchild on the pipe, huge output."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
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
    reap_all,
    records,
    stage,
    wait_for,
)
from support import Project, check_invariants

# Signal timing and parallel starts: on one xdist worker with the other timing tests.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("timing")]

# Waits on a barrier file, then runs `python -m orchestrator ARGS` unchanged:
# nothing is imported before the release, so each process pays its full start.
LAUNCHER = """
import os, sys, time
barrier = sys.argv[1]
while not os.path.exists(barrier):
    time.sleep(0.002)
import runpy
sys.argv = ["orchestrator", *sys.argv[2:]]
runpy.run_module("orchestrator", run_name="__main__", alter_sys=True)
"""


@pytest.fixture
def backend() -> str:
    """The crowd tests are about one host's lock and SQLite's single writer."""
    return "sqlite"


def test_sixteen_ticks_at_once(project: Project, tmp_path: Path) -> None:
    dump, finish = tmp_path / "work.jsonl", tmp_path / "finish"
    project.write_config(
        stage("gate", pipeline="gated", worker=["true"], verifier=PASS, gate=True)
        + stage(
            "work", worker=agent("--dump", str(dump), "--wait-file", str(finish)), verifier=PASS
        ),
        retry_interval=60,
    )
    assert project.cli("add", "g1", "--title", "At a gate", "--pipeline", "gated").exit_code == 0
    assert project.cli("tick").exit_code == 0
    assert project.state("g1") == "gate:awaiting_approval"
    for n in range(4):
        assert project.cli("add", f"w{n}", "--title", f"Work {n}").exit_code == 0

    barrier = tmp_path / "go"
    procs = []
    for n in range(16):
        quiet = ["-q"] if n % 2 else []
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", LAUNCHER, str(barrier), "tick", "--jobs", "4", *quiet],
                cwd=project.dir,
                env=project.process_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        )
    released: list[float] = []
    with ThreadPoolExecutor(1) as pool:
        reaped = pool.submit(reap_all, procs, lambda: released[0])
        try:
            time.sleep(0.5)  # let every interpreter reach the barrier
            released.append(time.monotonic())
            barrier.touch()

            # While the winner's workers run, a human command is not held up.
            wait_for(lambda: len(records(dump, "start")) == 4, what="the four workers")
            approve_started = time.monotonic()
            approve = project.run("approve", "g1")
            approve_took = time.monotonic() - approve_started
            assert approve.returncode == 0, approve.stderr
            print(f"approve during the tick took {approve_took:.2f}s")
            assert approve_took < 3.0  # an interpreter start; never a wait on the tick
            finish.touch()
            done = list(enumerate(reaped.result(timeout=60)))
        finally:
            kill_quietly([p.pid for p in procs])

    winners = [(n, d) for n, d in done if d.rc == 0]
    losers = [(n, d) for n, d in done if d.rc != 0]
    assert len(winners) == 1, [(n, d.rc, d.stderr) for n, d in done]
    assert all(d.rc == 75 for _, d in losers), [(d.rc, d.stderr) for _, d in losers]
    slowest = max(d.elapsed for _, d in losers)
    print(f"busy ticks exited after {sorted(round(d.elapsed, 2) for _, d in losers)} s")
    assert slowest < 3.0, f"a busy tick took {slowest:.2f}s"  # a busy tick gives up at once
    winner_pid = procs[winners[0][0]].pid
    for n, d in losers:
        assert d.stdout == ""
        if n % 2:
            assert d.stderr == ""  # -q: silent for cron
        else:
            [line] = d.stderr.splitlines()
            assert "another tick holds the lock" in line
            assert f"pid {winner_pid} on " in line

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
    pidfile, grandchild = tmp_path / "worker.pid", tmp_path / "grandchild.pid"
    project.write_config(
        stage(
            "work",
            worker=agent(
                "--pidfile", str(pidfile), "--grandchild", str(grandchild), "--sleep", "60"
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
        done = reap(tick, timeout=30)
        assert done.rc == 0, done.stderr
        # start-up (~1 s) + timeout 1 s + grace 1 s + the bounded drain, with room to spare
        print(f"tick with a 1 s timeout took {done.elapsed:.2f}s")
        assert done.elapsed < 7
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
