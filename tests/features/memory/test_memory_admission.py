"""Admission by memory through real `orchestrator tick` processes: with
`memory_mb = 2048` and 3 GB available `tick --jobs 4` runs one attempt at
a time and spends no attempt on the tasks it holds back; the reservations
of the attempts running on this host count (and only this host's, on
PostgreSQL); `explain` and the dry run say what is short."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from support import Project, check_invariants, make_project

from orchestrator.features.memory.meminfo import TEST_MEMINFO

pytestmark = pytest.mark.xdist_group("timing")

PASS = ["sh", "-c", 'echo \'{"pass": true, "score": 1.0}\'']
# Notes its start and end in a log the test reads: the attempts' overlap.
LOGGING = ["sh", "-c", 'echo "start $ORCHESTRATOR_TASK" >> "$0"; sleep 0.3; echo end >> "$0"']


def stages(worker: list[str], memory_mb: int = 2048) -> str:
    return (
        "[[pipelines.default.stages]]\n"
        'name = "work"\n'
        f"memory_mb = {memory_mb}\n"
        f"worker = {json.dumps(worker)}\n"
        f"verifier = {json.dumps(PASS)}\n"
    )


def with_memory(project: Project, folder: Path, available_mb: int) -> Path:
    """The host's `MemAvailable` as the project's ticks and commands read it."""
    meminfo = folder / "meminfo"
    meminfo.write_text(f"MemTotal: 33554432 kB\nMemAvailable: {available_mb * 1024} kB\n")
    project.env[TEST_MEMINFO] = str(meminfo)
    return meminfo


def add(project: Project, count: int) -> None:
    lines = "\n".join(json.dumps({"slug": f"t-{i}", "title": f"task {i}"}) for i in range(count))
    result = project.cli("add", "--from", "-", input=lines)
    assert result.exit_code == 0, result.output


def tick(project: Project, *args: str) -> str:
    done = project.run("tick", *args, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def most_at_once(log: Path) -> int:
    running = most = 0
    for line in log.read_text().splitlines():
        running += 1 if line.startswith("start") else -1
        most = max(most, running)
    return most


@pytest.mark.parametrize(("available_mb", "at_once"), [(3072, 1), (5120, 2)])
def test_jobs_4_runs_what_the_memory_holds_and_spends_no_attempt_on_the_rest(
    tmp_path: Path, migrated_url: str, available_mb: int, at_once: int
) -> None:
    """3 GB: one 2 GB attempt at a time. 5 GB: two, since the first one's
    reservation leaves 3 GB, then 1 GB: `MemAvailable` alone would admit
    all four."""
    log = tmp_path / "attempts.log"
    project = make_project(tmp_path / "proj", migrated_url, stages([*LOGGING, str(log)]))
    with_memory(project, tmp_path, available_mb)
    add(project, 4)
    tick(project, "--jobs", "4")
    assert most_at_once(log) == at_once
    assert len(log.read_text().splitlines()) == 8  # every task ran, in this one tick
    rows = project.query(
        "SELECT t.slug, t.status, a.number, a.outcome FROM tasks t "
        "JOIN attempts a ON a.task_id = t.id ORDER BY t.slug"
    )
    assert rows == [(f"t-{i}", "complete", 1, "passed") for i in range(4)]
    assert check_invariants(migrated_url, allow_running=False) == []


def test_a_stage_needing_no_memory_is_not_held_back(tmp_path: Path, migrated_url: str) -> None:
    log = tmp_path / "attempts.log"
    config = stages([*LOGGING, str(log)], memory_mb=0)
    project = make_project(tmp_path / "proj", migrated_url, config)
    with_memory(project, tmp_path, 100)
    add(project, 2)
    tick(project, "--jobs", "2")
    assert project.query("SELECT DISTINCT status FROM tasks") == [("complete",)]


# Runs until the test creates the file it names: an attempt held open.
HELD = ["sh", "-c", 'while [ ! -e "$0" ]; do sleep 0.05; done']


def wait_for_open_attempts(project: Project, count: int) -> None:
    deadline = time.monotonic() + 60
    query = "SELECT count(*) FROM attempts WHERE finished_at IS NULL"
    while project.query(query) != [(count,)]:
        assert time.monotonic() < deadline, "the attempt never opened"
        time.sleep(0.05)


def test_explain_and_the_dry_run_say_what_is_short(tmp_path: Path, migrated_url: str) -> None:
    release = tmp_path / "release"
    project = make_project(tmp_path / "proj", migrated_url, stages([*HELD, str(release)]))
    meminfo = with_memory(project, tmp_path, 1229)
    add(project, 2)
    waiting = "waiting for memory: 1.2 GB free, 2 GB needed"
    data = json.loads(project.cli("explain", "t-0", "--json").output)
    assert data["next_tick"] == f"{waiting}; then attempt 1 of work runs"
    assert f"next tick {waiting}" in project.cli("explain", "t-0").output
    said = tick(project, "--dry-run")
    assert f"t-0: would not run ({waiting}; nor would the tasks" in said
    assert "t-1" not in said  # passed over with t-0, not asked again
    tick(project)
    assert project.query("SELECT count(*) FROM attempts") == [(0,)]  # waiting spends nothing
    # 3 GB, and one attempt running here: what it reserved is not free.
    meminfo.write_text("MemAvailable: 3145728 kB\n")
    running = project.popen("tick", "--jobs", "2")
    try:
        wait_for_open_attempts(project, 1)
        (slug,) = (s for (s,) in project.query("SELECT slug FROM tasks WHERE status = 'ready'"))
        data = json.loads(project.cli("explain", slug, "--json").output)
        assert data["next_tick"].startswith("waiting for memory: 1 GB free, 2 GB needed")
        # Another host's explain: the attempt runs on this one, its memory is its own.
        project.env["ORCHESTRATOR_HOST"] = "elsewhere"
        data = json.loads(project.cli("explain", slug, "--json").output)
        assert data["next_tick"] == "runs attempt 1 of work"
        del project.env["ORCHESTRATOR_HOST"]
    finally:
        release.touch()
        out, err = running.communicate(timeout=120)
    assert running.returncode == 0, out + err
    assert project.query("SELECT DISTINCT outcome FROM attempts") == [("passed",)]
    assert project.query("SELECT count(*) FROM attempts") == [(2,)]


@pytest.mark.pg
def test_each_host_judges_its_own_memory(tmp_path: Path, migrated_pg: str) -> None:
    """Two hosts on one PostgreSQL database, 3 GB each: host A's attempt
    reserves 2 GB of A's memory, so A holds its other tasks back, and B
    still starts one (A's reservation is not B's memory)."""
    release = tmp_path / "release"
    hosts = []
    for name in ("host-a", "host-b"):
        project = make_project(tmp_path / name, migrated_pg, stages([*HELD, str(release)]))
        with_memory(project, tmp_path / name, 3072)
        project.env["ORCHESTRATOR_HOST"] = name
        hosts.append(project)
    add(hosts[0], 4)
    ticks = []
    try:
        for index, project in enumerate(hosts, start=1):
            ticks.append(project.popen("tick", "--jobs", "4"))
            wait_for_open_attempts(project, index)
        rows = hosts[0].query("SELECT host FROM attempts WHERE finished_at IS NULL ORDER BY host")
        assert rows == [("host-a",), ("host-b",)]
        ready = hosts[0].query("SELECT slug FROM tasks WHERE status = 'ready' ORDER BY slug")
        data = json.loads(hosts[0].cli("explain", ready[0][0], "--json").output)
        assert data["next_tick"].startswith("waiting for memory: 1 GB free, 2 GB needed")
    finally:
        release.touch()
        results = [(t.communicate(timeout=120), t.returncode) for t in ticks]
    assert [code for _, code in results] == [0] * len(ticks), results
    assert hosts[0].query("SELECT DISTINCT status FROM tasks") == [("complete",)]
    assert hosts[0].query("SELECT count(*) FROM attempts") == [(4,)]
    assert check_invariants(migrated_pg, allow_running=False) == []
