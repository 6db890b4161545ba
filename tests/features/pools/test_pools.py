"""Pools through real `orchestrator tick` processes: the cap holds across
hosts (PostgreSQL, sampled from the database through the run), a usage
limit pauses the pool and not the task, and the daily spend stops the pool
for the rest of the UTC day while other pools run on."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from support import Project, check_invariants, make_project

pytestmark = pytest.mark.xdist_group("timing")

PASS = ["sh", "-c", 'echo \'{"pass": true, "score": 1.0}\'']


def stages(pool: str, worker: list[str], pipeline: str = "default") -> str:
    return (
        f"[[pipelines.{pipeline}.stages]]\n"
        'name = "work"\n'
        f'pool = "{pool}"\n'
        f"worker = {json.dumps(worker)}\n"
        f"verifier = {json.dumps(PASS)}\n"
    )


def add(project: Project, prefix: str, count: int, pipeline: str = "default") -> None:
    lines = "\n".join(
        json.dumps({"slug": f"{prefix}-{i}", "title": f"task {i}", "pipeline": pipeline})
        for i in range(count)
    )
    result = project.cli("add", "--from", "-", input=lines)
    assert result.exit_code == 0, result.output


def tick(project: Project, *args: str, env: dict[str, str] | None = None) -> str:
    done = project.run("tick", *args, extra_env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def states(project: Project) -> dict[str, str]:
    return {
        slug: stage if status in ("ready", "complete") else f"{stage}:{status}"
        for slug, stage, status in project.query("SELECT slug, stage, status FROM tasks")
    }


class Sampler(threading.Thread):
    """The pool's open attempts, read from the database every 50 ms."""

    def __init__(self, url: str, pool: str) -> None:
        super().__init__(daemon=True)
        self.engine = create_engine(url)
        self.pool = pool
        self.samples: list[int] = []
        self.done = threading.Event()

    def run(self) -> None:
        query = text("SELECT count(*) FROM attempts WHERE pool = :p AND finished_at IS NULL")
        while not self.done.is_set():
            with self.engine.connect() as conn:
                self.samples.append(int(conn.execute(query, {"p": self.pool}).scalar_one()))
            time.sleep(0.05)

    def stop(self) -> list[int]:
        self.done.set()
        self.join()
        self.engine.dispose()
        return self.samples


@pytest.mark.pg
def test_max_running_holds_across_two_hosts_each_with_three_jobs(
    tmp_path: Path, migrated_pg: str
) -> None:
    config = "[pools.agent]\nmax_running = 2\n\n" + stages("agent", ["sleep", "0.3"])
    hosts = []
    for name in ("host-a", "host-b"):
        project = make_project(tmp_path / name, migrated_pg, config)
        project.env["ORCHESTRATOR_HOST"] = name
        hosts.append(project)
    add(hosts[0], "t", 10)
    sampler = Sampler(migrated_pg, "agent")
    sampler.start()
    failures: list[str] = []

    def cron(project: Project) -> None:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            done = project.run("tick", "--jobs", "3", timeout=120)
            if done.returncode != 0:
                failures.append(done.stdout + done.stderr)
                return
            if all(s == "complete" for s in states(project).values()):
                return

    threads = [threading.Thread(target=cron, args=(h,)) for h in hosts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    samples = sampler.stop()
    assert failures == []
    assert set(states(hosts[0]).values()) == {"complete"}
    assert len(samples) > 20
    assert max(samples) == 2  # the cap was reached, never passed
    rows = hosts[0].query("SELECT host, count(*) FROM attempts GROUP BY host")
    assert sum(n for _, n in rows) == 10  # each task ran once
    assert check_invariants(migrated_pg, allow_running=False) == []


LIMIT_WORKER = """\
import json, os, sys, time
marker = os.path.join(sys.argv[1], "limit-hit")
if os.environ["ORCHESTRATOR_TASK"] == "t-0" and not os.path.exists(marker):
    open(marker, "w").close()
    with open(os.environ["ORCHESTRATOR_USAGE_FILE"], "w") as f:
        json.dump({"limit_reset": float(sys.argv[2]), "cost_usd": 0}, f)
    sys.exit(1)
"""


def test_a_usage_limit_pauses_the_pool_until_its_reset_and_spends_no_attempt(
    tmp_path: Path, migrated_url: str
) -> None:
    """The first of 4 tasks meets a limit whose reset is an hour ahead;
    ticks during the pause claim nothing for the pool; once the reset has
    passed (the test moves it into the past: no test waits real time, and
    no load can outlast an hour), all 4 run."""
    reset = 3600.0
    script = tmp_path / "limit_worker.py"
    script.write_text(LIMIT_WORKER)
    worker = [sys.executable, str(script), str(tmp_path), str(reset)]
    config = "[pools.agent]\nmax_running = 1\n\n" + stages("agent", worker)
    project = make_project(tmp_path / "proj", migrated_url, config)
    add(project, "t", 4)
    said = tick(project, "--jobs", "3")
    assert "pool agent paused until" in said
    ((outcome, error),) = project.query("SELECT outcome, error FROM attempts")
    assert outcome == "backoff" and "usage limit" in error
    ((_until, reason),) = project.query("SELECT paused_until, pause_reason FROM pools")
    assert "limit_reset" in reason
    data = json.loads(project.cli("explain", "t-1", "--json").output)
    until = datetime.fromisoformat(data["pool"]["paused_until"])
    assert data["pool"]["paused"] and 0 < data["pool"]["seconds_left"] <= reset
    assert f"pool agent is paused until {until.isoformat()}" in data["next_tick"]
    assert f"paused until {until.isoformat()}" in project.cli("explain", "t-1").output
    listed = project.cli("list").output
    assert f"pool agent: 0 of 1 running; paused until {until.isoformat()}" in listed
    # Ticks during the pause (cron's, every host's) claim nothing for the pool.
    for _ in range(2):
        tick(project, "--jobs", "3")
        assert project.query("SELECT count(*) FROM attempts") == [(1,)]
    # The reset passes: the pause ends a second ago.
    until = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
    engine = create_engine(migrated_url)
    try:
        with engine.begin() as conn:
            stored = until.replace(tzinfo=None) if "sqlite" in migrated_url else until
            conn.execute(text("UPDATE pools SET paused_until = :u"), {"u": stored})
    finally:
        engine.dispose()
    for _ in range(4):  # a safety net: one tick is enough
        if set(states(project).values()) == {"complete"}:
            break
        tick(project, "--jobs", "3")
    assert set(states(project).values()) == {"complete"}
    rows = project.query(
        "SELECT t.slug, a.number, a.outcome, a.started_at FROM attempts a "
        "JOIN tasks t ON t.id = a.task_id ORDER BY a.id"
    )
    assert [(slug, n, o) for slug, n, o, _ in rows] == [
        ("t-0", 1, "backoff"),
        ("t-0", 2, "passed"),
        ("t-1", 1, "passed"),
        ("t-2", 1, "passed"),
        ("t-3", 1, "passed"),
    ]
    for _slug, _n, _o, started in rows[1:]:  # nothing of the pool ran before the reset
        started_at = started if isinstance(started, datetime) else datetime.fromisoformat(started)
        assert started_at.replace(tzinfo=until.tzinfo) >= until
    kinds = [k for (k,) in project.query("SELECT kind FROM events ORDER BY id")]
    assert kinds[:2] == ["pool_paused", "pool_resumed"]
    assert check_invariants(migrated_url, allow_running=False) == []


SPEND_WORKER = [
    "sh",
    "-c",
    'echo \'{"cost_usd": 0.6}\' > "$ORCHESTRATOR_USAGE_FILE"',
]


def test_max_usd_per_day_stops_the_pool_for_the_day_while_other_pools_run(
    tmp_path: Path, migrated_url: str
) -> None:
    config = (
        "[pools.paid]\nmax_usd_per_day = 1.0\n\n[pools.other]\nmax_running = 4\n\n"
        + stages("paid", SPEND_WORKER, "paid")
        + stages("other", SPEND_WORKER, "free")
    )
    project = make_project(tmp_path / "proj", migrated_url, config)
    add(project, "paid", 4, "paid")
    add(project, "free", 3, "free")
    tick(project, "--jobs", "1")
    tick(project, "--jobs", "2")  # a later tick the same day claims nothing more either
    got = states(project)
    paid = sorted(s for slug, s in got.items() if slug.startswith("paid"))
    assert paid == ["complete", "complete", "work", "work"]  # 0.6 + 0.6 reached 1.0
    assert {s for slug, s in got.items() if slug.startswith("free")} == {"complete"}
    data = json.loads(project.cli("explain", "paid-3", "--json").output)
    assert data["pool"]["spent_today_usd"] == pytest.approx(1.2)
    assert "spent $1.2000 of its $1.0000 a day (UTC)" in data["next_tick"]
    if migrated_url.startswith("postgresql"):
        return  # the server's clock says which day it is: faketime cannot move it
    faketime = shutil.which("faketime")
    if faketime is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("faketime is not installed (CI=true: it must run)")
        return
    # The next UTC day the pool claims again, until that day's spend is reached.
    done = subprocess.run(  # noqa: PLW1510 - checked below
        [faketime, "-f", "+1d", sys.executable, "-m", "orchestrator", "tick", "--jobs", "1"],
        cwd=project.dir,
        env=project.process_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert {s for slug, s in states(project).items() if slug.startswith("paid")} == {"complete"}


HOSTILE_LIMIT_WORKER = """\
import os, sys
with open(os.environ["ORCHESTRATOR_USAGE_FILE"], "w") as f:
    f.write(sys.argv[1])
sys.exit(1)
"""


@pytest.mark.parametrize(
    "report",
    [
        '{"limit_reset": 1e12}',  # seconds: past year 9999
        '{"limit_reset": 100000000000000000000000}',  # too large for a timedelta
        "[" * 60000,  # nested beyond the JSON reader's recursion
    ],
)
def test_a_hostile_limit_reset_is_recorded_not_a_crash_of_the_tick(
    tmp_path: Path, migrated_url: str, report: str
) -> None:
    """A usage file a worker wrote is its to write: a reset no clock can
    hold (or JSON nested too deep to read) is no reset time, and the
    attempt is recorded like any other that met a limit or failed."""
    script = tmp_path / "hostile_worker.py"
    script.write_text(HOSTILE_LIMIT_WORKER)
    worker = [sys.executable, str(script), report]
    config = "[pools.agent]\nmax_running = 1\n\n" + stages("agent", worker)
    project = make_project(tmp_path / "proj", migrated_url, config)
    add(project, "t", 1)
    done = project.run("tick", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = project.query("SELECT finished_at, outcome FROM attempts")
    assert rows and all(finished is not None for finished, _ in rows)
    assert {outcome for _, outcome in rows} <= {"backoff", "worker_error"}
    assert check_invariants(migrated_url, allow_running=False) == []


def test_a_round_of_candidates_counts_each_candidate_against_the_pool(
    project: Project,
) -> None:
    """Four candidates of one round in a pool of two, under `--jobs 4`:
    each candidate is an attempt of the pool, so at most two run at once,
    and the round still ends decided, every candidate recorded."""
    from support import make_repo

    make_repo(project.dir)
    config = (
        "[pools.agent]\nmax_running = 2\n\n"
        '[pipelines.default]\nrepository = "repo"\n\n'
        + stages("agent", ["sh", "-c", 'echo "$ORCHESTRATOR_CANDIDATE" > c.txt; sleep 0.3'])
        + "candidates = 4\n"
    )
    project.write_config(config)
    assert project.cli("add", "fix", "--title", "fix").exit_code == 0
    tick(project, "--jobs", "4")
    rows = project.query(
        "SELECT candidate, pool, started_at, finished_at FROM attempts ORDER BY candidate"
    )
    assert [(r[0], r[1]) for r in rows] == [(c, "agent") for c in (1, 2, 3, 4)]
    spans = [(str(r[2]), str(r[3])) for r in rows]
    most = max(sum(s <= at < f for s, f in spans) for at, _ in spans)
    assert most == 2  # the cap was reached by the round, never passed
    assert states(project) == {"fix": "complete"}
    assert check_invariants(project.db_url, allow_running=False) == []


def test_dry_run_asks_the_pools_and_writes_nothing(tmp_path: Path, migrated_url: str) -> None:
    """`tick --dry-run` says what the real tick then does: a pool whose
    daily spend is reached, or that is paused, runs nothing; another pool
    runs; the dry run writes no pool row, pause or event."""
    config = (
        "[pools.paid]\nmax_usd_per_day = 1.0\n\n[pools.held]\nmax_running = 4\n\n"
        "[pools.other]\nmax_running = 4\n\n"
        + stages("paid", SPEND_WORKER, "paid")
        + stages("held", SPEND_WORKER, "held")
        + stages("other", SPEND_WORKER, "free")
    )
    project = make_project(tmp_path / "proj", migrated_url, config)
    add(project, "paid", 2, "paid")
    tick(project, "--jobs", "1")  # 0.6 + 0.6: the day's 1.0 is spent
    add(project, "later", 5, "paid")
    add(project, "held", 2, "held")
    add(project, "free", 1, "free")
    engine = create_engine(migrated_url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO pools (name, paused_until, paused_at, pause_reason, pause_streak) "
                "VALUES ('held', :until, :at, 'usage limit', 1)"
            ),
            {"until": datetime(2999, 1, 1), "at": datetime(2026, 1, 1)},
        )
    engine.dispose()
    before = project.query("SELECT * FROM pools ORDER BY name"), project.counts()
    said = tick(project, "--dry-run")
    assert "free-0: would run work attempt 1" in said, said
    assert "would run" not in said.replace("free-0: would run", ""), said
    assert "pool paid spent $1.2000 of $1.0000 today (UTC)" in said, said
    assert "pool held paused until 2999-01-01" in said, said
    assert (project.query("SELECT * FROM pools ORDER BY name"), project.counts()) == before
    tick(project, "--jobs", "1")
    done = {slug for slug, s in states(project).items() if s == "complete"}
    assert done == {"paid-0", "paid-1", "free-0"}
