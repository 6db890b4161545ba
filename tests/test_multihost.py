"""Several hosts ticking against one PostgreSQL database (issue 5).

Each "host" is its own project folder (own lock file, workspace root and
state root) with its own ORCHESTRATOR_HOST name, sharing one database. The
file lock never coordinates them; SKIP LOCKED claims and fenced writes do.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from support import Project, check_invariants, make_project

# Kept on one xdist worker with the other tests of processes racing each other.
pytestmark = [pytest.mark.pg, pytest.mark.xdist_group("timing")]

SLEEP_STAGE = """
[[pipelines.default.stages]]
name = "work"
worker = ["sh", "-c", "echo $$ > started-{attempt}; sleep SLEEP; echo done > finished-{attempt}"]
verifier = ["sh", "-c", "echo '{\\"pass\\": true, \\"score\\": 1.0}'"]
"""


@pytest.fixture
def shared_url(migrated_pg: str) -> str:
    return migrated_pg


def host(tmp_path: Path, url: str, name: str, sleep: float, **settings: object) -> Project:
    project = make_project(
        tmp_path / name, url, SLEEP_STAGE.replace("SLEEP", str(sleep)), **settings
    )
    project.env["ORCHESTRATOR_HOST"] = name
    return project


def add_tasks(project: Project, prefix: str, count: int) -> None:
    lines = "\n".join(
        json.dumps({"slug": f"{prefix}-{i}", "title": f"task {i}"}) for i in range(count)
    )
    assert project.cli("add", "--from", "-", input=lines).exit_code == 0


GATED_STAGE = """
[[pipelines.default.stages]]
name = "work"
worker = ["sh", "-c", "n=0; while [ ! -e GO ] && [ $n -lt 6000 ]; do sleep 0.05; n=$((n+1)); done"]
verifier = ["sh", "-c", "echo '{\\"pass\\": true, \\"score\\": 1.0}'"]
"""


def running_by_host(url: str) -> dict[str, int]:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT host, count(*) FROM attempts WHERE finished_at IS NULL GROUP BY host")
            ).all()
    finally:
        engine.dispose()
    return {str(h): int(n) for h, n in rows}


def test_two_hosts_share_the_work_and_run_each_task_once(tmp_path: Path, shared_url: str) -> None:
    """Each host has two slots: only when both hosts run two attempts at
    once do the workers (which wait for the GO file) finish. No clock: the
    test waits on rows, then on the ticks' exits."""
    go = tmp_path / "GO"
    stage = GATED_STAGE.replace("GO", str(go))
    a = make_project(tmp_path / "host-a", shared_url, stage)
    b = make_project(tmp_path / "host-b", shared_url, stage)
    a.env["ORCHESTRATOR_HOST"], b.env["ORCHESTRATOR_HOST"] = "host-a", "host-b"
    add_tasks(a, "pair", 8)
    procs = [h.popen("tick", "--jobs", "2") for h in (a, b)]
    try:
        wait_for(lambda: running_by_host(shared_url) == {"host-a": 2, "host-b": 2}, 60.0)
    finally:
        go.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err

    rows = a.query(
        "SELECT t.slug, count(a.id), min(a.host) FROM tasks t JOIN attempts a ON a.task_id = t.id "
        "WHERE t.slug LIKE 'pair-%' GROUP BY t.slug"
    )
    assert len(rows) == 8 and all(count == 1 for _, count, _ in rows)
    hosts = {h for _, _, h in rows}
    assert hosts == {"host-a", "host-b"}
    assert all(a.state(f"pair-{i}") == "complete" for i in range(8))
    assert check_invariants(shared_url, allow_running=False) == []


def expire_leases(url: str) -> None:
    """Move every lease into the past: what waiting it out would do, without the wait."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE attempts SET lease_expires_at = '2000-01-01 00:00:00'"))
    finally:
        engine.dispose()


def wait_for(predicate, timeout: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def test_killed_host_is_recovered_by_another_after_its_lease(
    tmp_path: Path, shared_url: str
) -> None:
    a = host(tmp_path, shared_url, "host-a", 30, lease_seconds=3)
    b = host(tmp_path, shared_url, "host-b", 0.1, lease_seconds=3)
    add_tasks(a, "t", 1)
    tick_a = a.popen("tick")
    started = a.dir / "tasks" / "t-0" / "started-1"
    wait_for(started.exists)
    orphan = int(started.read_text())
    os.killpg(tick_a.pid, signal.SIGKILL)
    tick_a.communicate()
    try:
        # Another host cannot tell that host-a died: it waits out the lease.
        assert b.run("tick").returncode == 0
        assert a.state("t-0") == "work:running"
        assert a.query("SELECT count(*) FROM attempts")[0][0] == 1
        expire_leases(shared_url)  # as if its 3 s had passed
        assert b.run("tick").returncode == 0
        outcomes = a.query("SELECT number, outcome, host FROM attempts ORDER BY number")
        assert outcomes == [(1, "crashed", "host-a")]
        # The workspace is on host-a (affinity "host"): host-b recovers the
        # attempt but leaves the task to host-a.
        assert a.state("t-0") == "work"
        a.write_config(SLEEP_STAGE.replace("SLEEP", "0.1"), lease_seconds=3)
        assert a.run("tick").returncode == 0
        outcomes = a.query("SELECT number, outcome, host FROM attempts ORDER BY number")
        assert outcomes == [(1, "crashed", "host-a"), (2, "passed", "host-a")]
        assert a.state("t-0") == "complete"
        assert check_invariants(shared_url, allow_running=False) == []
    finally:
        os.kill(orphan, signal.SIGKILL)


def test_stopped_host_past_its_lease_cannot_write(tmp_path: Path, shared_url: str) -> None:
    # affinity "any": the workspace root stands for shared storage.
    a = host(tmp_path, shared_url, "host-a", 1.0, lease_seconds=2, affinity="any")
    b = host(tmp_path, shared_url, "host-b", 0.1, lease_seconds=2, affinity="any")
    add_tasks(a, "t", 1)
    tick_a = a.popen("tick")
    started = a.dir / "tasks" / "t-0" / "started-1"
    wait_for(started.exists)
    os.kill(tick_a.pid, signal.SIGSTOP)
    try:
        finished = a.dir / "tasks" / "t-0" / "finished-1"
        wait_for(finished.exists)  # the worker ends while its tick is frozen
        expire_leases(shared_url)  # as if the frozen tick had slept past its lease
        assert b.run("tick").returncode == 0
        assert a.state("t-0") == "complete"
    finally:
        os.kill(tick_a.pid, signal.SIGCONT)
    _, err = tick_a.communicate(timeout=30)
    assert tick_a.returncode == 0, err
    rows = a.query("SELECT number, outcome, host, late_result FROM attempts ORDER BY number")
    assert [(n, o, h) for n, o, h, _ in rows] == [(1, "crashed", "host-a"), (2, "passed", "host-b")]
    assert rows[0][3] is not None, "the late result is kept"
    events = [r[0] for r in a.query("SELECT event FROM transitions ORDER BY seq")]
    assert events == ["add", "claim", "retry", "claim", "stage_passed"]
    assert check_invariants(shared_url, allow_running=False) == []


def test_two_hosts_take_the_candidates_of_one_round(tmp_path: Path, shared_url: str) -> None:
    """Best of N on PostgreSQL: a round of four candidates, two taken by
    each host (`tick --jobs 2` each; the workers wait for GO, so neither
    host can take more than its slots). One repository both hosts reach;
    the round is decided once, its winner the task branch's tip."""
    from support import git, make_repo

    go = tmp_path / "GO"
    repo = make_repo(tmp_path)
    worker = (
        f'echo "$ORCHESTRATOR_CANDIDATE" > answer.txt; n=0; '
        f"while [ ! -e {go} ] && [ $n -lt 6000 ]; do sleep 0.05; n=$((n+1)); done"
    )
    verifier = (
        "c=$(cat answer.txt); "
        'echo "{\\"pass\\": true, \\"score\\": 0.$c, \\"reasons\\": [\\"$c\\"]}"'
    )
    stage = (
        f'[pipelines.default]\nrepository = "{repo}"\n\n[[pipelines.default.stages]]\n'
        f'name = "work"\ncandidates = 4\nworker = {json.dumps(["sh", "-c", worker])}\n'
        f"verifier = {json.dumps(['sh', '-c', verifier])}\n"
    )
    a = make_project(tmp_path / "host-a", shared_url, stage, affinity="any")
    b = make_project(tmp_path / "host-b", shared_url, stage, affinity="any")
    a.env["ORCHESTRATOR_HOST"], b.env["ORCHESTRATOR_HOST"] = "host-a", "host-b"
    assert a.cli("add", "fix", "--title", "four ways").exit_code == 0
    procs = [a.popen("tick", "--jobs", "2")]
    try:
        wait_for(lambda: running_by_host(shared_url) == {"host-a": 2}, 240.0)
        procs.append(b.popen("tick", "--jobs", "2"))
        wait_for(lambda: running_by_host(shared_url) == {"host-a": 2, "host-b": 2}, 240.0)
    finally:
        go.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    rows = a.query("SELECT candidate, host, outcome, score, commit_sha FROM attempts ORDER BY 1")
    assert [r[0] for r in rows] == [1, 2, 3, 4]
    assert {r[1] for r in rows} == {"host-a", "host-b"}
    assert [r[2] for r in rows] == ["passed"] * 4
    assert a.state("fix") == "complete"
    # The best score is candidate 4's (0.4): it is the tip, the others kept at refs.
    assert [r[0] for r in rows if r[4]] == [4]
    assert git(repo, "rev-parse", "task/fix").strip() == rows[3][4]
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/orchestrator/fix/").split()
    assert len(refs) == 4
    decided = a.query("SELECT count(*) FROM transitions WHERE event <> 'claim' AND event <> 'add'")
    assert decided == [(1,)]
    assert check_invariants(shared_url, allow_running=False) == []
