"""`python -m bench [--rounds N] [--only NAME ...] [--pg URL]`

Each benchmark times a measured command and its reference round by round,
interleaved, and prints the median ratio with its min-max: these machines
are noisy, so absolute times mean little. Targets (docs/explanation/performance.md):

  noop      no-op tick, empty database / import click, filelock, sqlalchemy.orm  <= 1.25
  busy      tick finding the lock held / no-op tick                               <= 0.35
  attempt   (tick of 100 attempts - no-op tick) / (stdlib 100 - stdlib 0)         <= 2.0
  growth    idle tick, 100k tasks + 1M attempts / idle tick, empty                <= 1.3
            list --state S --json (10 rows), big / empty                          <= 1.3
            show, task with 1,000 attempts / task with 1                          <= 2
  bytes     database bytes per attempt                                             <= 2 KB
  sandbox   (tick of 40 attempts in bubblewrap - no-op) / (on the host - no-op)    <= 1.5
  pg        two PostgreSQL hosts / one host, 16 tasks sleeping 1 s, --jobs 2      <= 0.6
  land      landing one task (lock, rebase, ref move, record; no check) /
            a hand-written `git rebase && git update-ref` of the same branch      <= 3
            git processes of that landing, counted (bench/gitcount.py)            <= 5
  idle      the line `orchestrator cron` prints, as cron runs it (home folder,
            cron's environment), idle, 100 gates waiting / python -c pass       <= 3
  wake      approve -> next stage starts under run --interval 60 (median, s)     <= 1 s
            on SQLite, and on PostgreSQL with --pg (bench/wake.py)
  candidates  a round of 4 trivial candidates, --jobs 4 /
            (one trivial attempt + stdlib minimum of 4 parallel spawns)           <= 1.5
            and the git processes of that round, counted (no target)
  telemetry no-op tick, telemetry on and its collector down / telemetry off   <= 1.1
            (bench/telemetry.py; and a tick of 10 attempts the same way, no target)
  dbos      100 staged attempts, the tick as a whole process / DBOS Transact
            running the same two subprocess steps per workflow on SQLite          <= 0.45
            and / the stdlib minimum (bench/minimal_tick.py)                      <= 2.5
            (bench/dbos_compare.py; DBOS from the `bench` extra)
  approve   approve while a tick holds 4 attempts / approve, no tick             <= 1.5
            (bench/approve.py; the tests prove it never waits, this times it)
  verifiers `verifiers` over 1M attempts, 100k decisions / SELECT count(*)
            over attempts, in one process (bench/verifiers.py)                <= 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

PY = sys.executable
BENCH = Path(__file__).resolve().parent

ONE_STAGE = """
[orchestrator]
workspace_root = "tasks"
state_root = "state"
lock_file = "orchestrator.lock"

[[pipelines.default.stages]]
name = "work"
worker = ["/bin/true"]
verifier = ["/bin/echo", "{\\"pass\\": true, \\"score\\": 1.0}"]
"""


def timed(
    argv: Sequence[str],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    expect: Sequence[int] = (0,),
) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, check=False, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode not in expect:
        raise SystemExit(f"{argv} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return elapsed


def orch(*args: str) -> list[str]:
    return [PY, "-m", "orchestrator", *args]


def project(folder: Path, config: str = ONE_STAGE) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "orchestrator.toml").write_text(config)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    env["ORCHESTRATOR_CONFIG"] = str(folder / "orchestrator.toml")
    subprocess.run(orch("db", "upgrade"), env=env, check=True, capture_output=True)
    return env


def add_tasks(env: dict[str, str], count: int, prefix: str = "t") -> None:
    lines = "\n".join(json.dumps({"slug": f"{prefix}-{i}", "title": "bench"}) for i in range(count))
    subprocess.run(
        orch("add", "--from", "-"), env=env, input=lines, text=True, check=True, capture_output=True
    )


def report(name: str, ratios: list[float], target: float, unit: str = "x") -> tuple[str, bool]:
    median = statistics.median(ratios)
    ok = median <= target
    line = (
        f"{name:<58} {median:6.2f}{unit}  (min {min(ratios):.2f}, max {max(ratios):.2f}, "
        f"n={len(ratios)})  target <= {target}  {'ok' if ok else 'MISSED'}"
    )
    print(line, flush=True)
    return line, ok


def info(name: str, ratios: list[float]) -> tuple[str, bool | None]:
    """A figure with no target: printed to explain another one."""
    line = (
        f"{name:<58} {statistics.median(ratios):6.2f}x  "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f}, n={len(ratios)})"
    )
    print(line, flush=True)
    return line, None


def interleave(
    rounds: int, measured: Callable[[], float], reference: Callable[[], float]
) -> list[float]:
    ratios = []
    for _ in range(rounds):
        ref = reference()
        ratios.append(measured() / ref)
    return ratios


# -- the benchmarks ------------------------------------------------------------------


# A tick with nothing to do on the full path (imports, engine, jobs): an
# option the idle answer does not vouch for (`tick.idle`) keeps it off, so
# these lanes measure the tick itself; the idle answer has its own lane.
FULL_NOOP_TICK = ("tick", "--jobs", "1")


def bench_noop_and_busy(work: Path, rounds: int) -> list[tuple[str, bool]]:
    env = project(work / "noop")
    ref = [PY, "-c", "import click, filelock, sqlalchemy.orm"]
    noop = orch(*FULL_NOOP_TICK)
    results = [
        report(
            "no-op tick / import click, filelock, sqlalchemy.orm",
            interleave(rounds, lambda: timed(noop, env=env), lambda: timed(ref)),
            1.25,
        )
    ]
    # Hold the lock the way a tick does (with its holder note) for the whole run.
    holder = subprocess.Popen(
        [
            PY,
            "-c",
            "import sys, time, pathlib; from orchestrator.locking import TickLock; "
            "lock = TickLock(pathlib.Path(sys.argv[1])); lock.acquire(); "
            "print('held', flush=True); time.sleep(600)",
            str(work / "noop" / "orchestrator.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    try:
        busy = lambda: timed(orch("tick", "-q"), env=env, expect=(75,))  # noqa: E731
        noop_env = project(work / "noop2")
        results.append(
            report(
                "tick finding the lock held / no-op tick",
                interleave(rounds, busy, lambda: timed(noop, env=noop_env)),
                0.35,
            )
        )
        small = [PY, "-c", "import click, filelock, tomllib"]
        results.append(
            report(
                "tick finding the lock held / import click, filelock, tomllib",
                interleave(rounds, busy, lambda: timed(small)),
                1.5,
            )
        )
    finally:
        holder.kill()
        holder.communicate()
    return results


def bench_attempts(work: Path, rounds: int, count: int = 100) -> list[tuple[str, bool | None]]:
    template = work / "attempt-template"
    env = project(template)
    add_tasks(env, count)
    empty = work / "attempt-empty"
    empty_env = project(empty)
    minimal = [PY, str(BENCH / "minimal_tick.py")]
    ratios, with_files, sizes = [], [], []
    for index in range(rounds):
        run = work / f"attempt-{index}"
        shutil.copytree(template, run)
        run_env = {**env, "ORCHESTRATOR_CONFIG": str(run / "orchestrator.toml")}
        db = run / "orchestrator.db"
        before = _db_bytes(db)
        minimal_n = timed([*minimal, str(count), str(work / f"min-{index}-n.db")])
        tick_n = timed(orch("tick"), env=run_env)
        minimal_0 = timed([*minimal, "0", str(work / f"min-{index}-0.db")])
        tick_0 = timed(orch(*FULL_NOOP_TICK), env=empty_env)
        files_n = timed([*minimal, str(count), str(work / f"min-{index}-f.db"), "--files"])
        ratios.append((tick_n - tick_0) / (minimal_n - minimal_0))
        with_files.append((tick_n - tick_0) / (files_n - minimal_0))
        sizes.append((_db_bytes(db) - before) / count)
        done = (
            sqlite3.connect(db)
            .execute("SELECT count(*) FROM tasks WHERE status = 'complete'")
            .fetchone()[0]
        )
        if done != count:
            raise SystemExit(f"attempt bench: only {done} of {count} tasks completed")
    return [
        report(f"per-attempt cost: tick of {count} attempts vs stdlib minimum", ratios, 2.0),
        info(
            "  the same, vs a minimum that also makes the attempt's folders and capture file",
            with_files,
        ),
        report(
            "database bytes per attempt (KB, incl. its transitions)",
            [s / 1024 for s in sizes],
            2.0,
            unit=" KB",
        ),
    ]


def _db_bytes(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        return int(page_size * (pages - free))
    finally:
        conn.close()


def populate_big(db: Path, tasks: int, attempts_per_task: int) -> None:
    """Fill a migrated database with finished history, fast (raw SQL)."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN")
    now = "2026-01-01 00:00:00.000000"
    conn.executemany(
        "INSERT INTO tasks (id, slug, title, body, pipeline, priority, stage, status, run, version,"
        " next_hint, created_at, updated_at) VALUES (?, ?, 'bench', '', 'default', 0, 'complete',"
        " 'complete', 2, 2, '', ?, ?)",
        ((i, f"big-{i}", now, now) for i in range(1, tasks + 1)),
    )
    conn.executemany(
        "INSERT INTO transitions (task_id, seq, from_state, to_state, event, actor, at)"
        " VALUES (?, ?, ?, ?, ?, 'bench', ?)",
        (
            row
            for i in range(1, tasks + 1)
            for row in (
                (i, 1, None, "work", "add", now),
                (i, 2, "work:running", "complete", "stage_passed", now),
            )
        ),
    )
    conn.executemany(
        "INSERT INTO attempts (task_id, stage, run, number, outcome, pass, score, hint,"
        " lease_token, lease_expires_at, host, boot_id, tick_pid, started_at, finished_at)"
        " VALUES (?, 'work', 1, ?, 'failed', 0, 0.5, '', 'x', ?, 'bench', 'b', 1, ?, ?)",
        (
            (i, n, now, now, now)
            for i in range(1, tasks + 1)
            for n in range(1, attempts_per_task + 1)
        ),
    )
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def bench_growth(work: Path, rounds: int) -> list[tuple[str, bool]]:
    big = work / "big"
    big_env = project(big)
    print("  (populating 100,000 tasks and 1,000,000 attempts ...)", flush=True)
    populate_big(big / "orchestrator.db", 100_000, 10)
    add_tasks(big_env, 10, prefix="halted")
    empty = work / "small"
    empty_env = project(empty)
    add_tasks(empty_env, 10, prefix="halted")
    for env in (big_env, empty_env):
        for i in range(10):
            subprocess.run(orch("halt", f"halted-{i}"), env=env, check=True, capture_output=True)
    results = [
        report(
            "idle tick: 100k tasks + 1M attempts / empty database",
            interleave(
                rounds,
                lambda: timed(orch("tick"), env=big_env),
                lambda: timed(orch("tick"), env=empty_env),
            ),
            1.3,
        )
    ]
    listing = orch("list", "--state", "halted", "--json")
    results.append(
        report(
            "list --state halted --json (10 rows): big / empty",
            interleave(
                rounds, lambda: timed(listing, env=big_env), lambda: timed(listing, env=empty_env)
            ),
            1.3,
        )
    )
    # show: one task with 1,000 attempts against one with 1.
    conn = sqlite3.connect(big / "orchestrator.db", isolation_level=None)
    now = "2026-01-01 00:00:00.000000"
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO attempts (task_id, stage, run, number, outcome, pass, score, hint,"
        " lease_token, lease_expires_at, host, boot_id, tick_pid, started_at, finished_at)"
        " VALUES (1, 'work', 1, ?, 'failed', 0, 0.5, '', 'x', ?, 'bench', 'b', 1, ?, ?)",
        ((n, now, now, now) for n in range(11, 1001)),
    )
    conn.execute("COMMIT")
    conn.close()
    results.append(
        report(
            "show of a task with 1,000 attempts / with 1",
            interleave(
                rounds,
                lambda: timed(orch("show", "big-1"), env=big_env),
                lambda: timed(orch("show", "halted-0"), env=empty_env),
            ),
            2.0,
        )
    )
    return results


PG_STAGE = """
[orchestrator]
workspace_root = "tasks"
state_root = "state"
lock_file = "orchestrator.lock"
affinity = "any"

[[pipelines.default.stages]]
name = "work"
worker = ["sleep", "1"]
verifier = ["/bin/echo", "{\\"pass\\": true, \\"score\\": 1.0}"]
"""


def bench_pg(work: Path, rounds: int, server: str) -> list[tuple[str, bool]]:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    url = make_url(server)
    name = f"orch_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    db_url = url.set(database=name).render_as_string(hide_password=False)
    try:
        envs = []
        for host in ("a", "b"):
            env = project(
                work / f"pg-{host}",
                PG_STAGE.replace("[orchestrator]", f'[orchestrator]\ndatabase = "{db_url}"'),
            )
            env["ORCHESTRATOR_HOST"] = f"bench-{host}"
            envs.append(env)
        ratios = []
        for index in range(rounds):
            add_tasks(envs[0], 16, prefix=f"one-{index}")
            one = _parallel_ticks(envs[:1])
            add_tasks(envs[0], 16, prefix=f"two-{index}")
            two = _parallel_ticks(envs)
            ratios.append(two / one)
        return [report("PostgreSQL: two hosts / one host (16 x sleep 1, --jobs 2)", ratios, 0.6)]
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _parallel_ticks(envs: list[dict[str, str]]) -> float:
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            orch("tick", "--jobs", "2"),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for env in envs
    ]
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"pg tick failed: {err}")
    return time.perf_counter() - started


def bench_landing(work: Path, rounds: int) -> list[tuple[str, bool]]:
    from bench import landing

    found = [
        report(
            "landing one task (merge, no check) / git rebase && git update-ref",
            landing.ratios(work / "landing", rounds),
            3.0,
        )
    ]
    calls = landing.git_calls(work / "landing-counted")
    found.append(count("  git processes per landing", calls, GIT_PER_LANDING))
    print("    " + " ".join(calls), flush=True)
    return found


# Git processes a landing may start (issue 37: the hand-written one needs 3).
GIT_PER_LANDING = 5


def count(name: str, calls: Sequence[str], target: int) -> tuple[str, bool]:
    """A count measured once (it does not vary with load), with its target."""
    ok = len(calls) <= target
    line = f"{name:<58} {len(calls):6d}   target <= {target}  {'ok' if ok else 'MISSED'}"
    print(line, flush=True)
    return line, ok


CANDIDATE_STAGE = """
[orchestrator]
workspace_root = "tasks"
state_root = "state"
lock_file = "orchestrator.lock"

[pipelines.default]
repository = "repo"

[[pipelines.default.stages]]
name = "work"
candidates = K
worker = ["/bin/true"]
verifier = ["/bin/echo", "{\\"pass\\": true, \\"score\\": 1.0}"]
"""
# The stdlib minimum of four candidates: four worker + verifier pairs
# spawned at once from four threads, timed inside one interpreter.
PARALLEL_SPAWNS = """
import json, subprocess, threading, time
def one():
    subprocess.run(["/bin/true"], check=True)
    json.loads(subprocess.run(["/bin/echo", '{"pass": true, "score": 1.0}'],
               check=True, capture_output=True).stdout)
started = time.perf_counter()
threads = [threading.Thread(target=one) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(time.perf_counter() - started)
"""


def _repository(folder: Path) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    env |= {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b"}
    env |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    repo = folder / "repo"
    repo.mkdir(parents=True)
    for argv in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "base"]):
        subprocess.run(["git", "-C", str(repo), *argv], check=True, env=env)


def bench_candidates(work: Path, rounds: int) -> list[tuple[str, bool | None]]:
    """A tick of one task whose stage has 4 candidates (four worktrees, four
    commits, the round decided and settled), against a tick of the same
    task with one attempt plus what four parallel spawns cost at least."""
    ratios, spawn_parts = [], []
    for index in range(rounds):
        envs = {}
        for k in (1, 4):
            folder = work / f"cand-{index}-{k}"
            _repository(folder)
            envs[k] = project(folder, CANDIDATE_STAGE.replace("K", str(k)))
            add_tasks(envs[k], 1)
        one = timed(orch("tick"), env=envs[1])
        spawns = float(
            subprocess.run(
                [PY, "-c", PARALLEL_SPAWNS], check=True, capture_output=True, text=True
            ).stdout
        )
        four = timed(orch("tick", "--jobs", "4"), env=envs[4])
        done = (
            sqlite3.connect(work / f"cand-{index}-4" / "orchestrator.db")
            .execute("SELECT count(*) FROM attempts WHERE outcome = 'passed' AND round = 1")
            .fetchone()[0]
        )
        if done != 4:
            raise SystemExit(f"candidates bench: {done} of 4 candidates passed")
        ratios.append(four / (one + spawns))
        spawn_parts.append(spawns / one)
    return [
        report("round of 4 candidates --jobs 4 / (one attempt + 4 parallel spawns)", ratios, 1.5),
        info("  4 parallel spawns / one attempt's tick", spawn_parts),
        _round_git(work / "cand-counted"),
    ]


def _round_git(folder: Path) -> tuple[str, None]:
    """The git processes of that tick's round (worktrees, commits, the
    settle), counted on an untimed tick of its own (`bench.gitcount`)."""
    from bench.gitcount import counting_git

    _repository(folder)
    env = project(folder, CANDIDATE_STAGE.replace("K", "4"))
    add_tasks(env, 1)
    with counting_git(folder / "gitcount") as count:
        env["PATH"] = os.environ["PATH"]
        timed(orch("tick", "--jobs", "4"), env=env)
        calls = count.calls()
    line = f"{'  git processes per round of 4 candidates':<58} {len(calls):6d}"
    print(line, flush=True)
    print("    " + " ".join(calls), flush=True)
    return line, None


def compile_package() -> None:
    """Measure the package as installed: pip compiles bytecode at install
    time, but a checkout run with PYTHONDONTWRITEBYTECODE=1 (or a read-only
    tree) would compile every module on every tick, ~100 ms the references
    (whose libraries are installed) never pay."""
    import orchestrator

    package = Path(orchestrator.__file__).resolve().parent
    subprocess.run([PY, "-m", "compileall", "-q", str(package)], check=True)


LANES = [
    "noop",
    "attempt",
    "growth",
    "pg",
    "land",
    "idle",
    "wake",
    "sandbox",
    "candidates",
    "approve",
    "verifiers",
    "telemetry",
    "dbos",
]


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", nargs="*", choices=LANES)
    parser.add_argument(
        "--pg",
        default=os.environ.get("ORCHESTRATOR_TEST_PG_URL"),
        help="a PostgreSQL server URL where CREATE DATABASE is allowed",
    )
    args = parser.parse_args()
    chosen = set(args.only or LANES)
    compile_package()
    results: list[tuple[str, bool | None]] = []
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        work = Path(tmp)
        if "noop" in chosen:
            results += bench_noop_and_busy(work, args.rounds)
        if "attempt" in chosen:
            results += bench_attempts(work, max(3, args.rounds))
        if "growth" in chosen:
            results += bench_growth(work, args.rounds)
        if "land" in chosen:
            results += bench_landing(work, args.rounds)
        if "sandbox" in chosen:
            from bench.sandbox import bench_sandbox

            results += bench_sandbox(work, max(3, args.rounds))
        if "candidates" in chosen:
            results += bench_candidates(work, max(3, args.rounds))
        if "dbos" in chosen:
            from bench.dbos_compare import bench_dbos

            results += bench_dbos(work, max(3, args.rounds))
        if "approve" in chosen:
            from bench.approve import bench_approve

            results += bench_approve(work, args.rounds)
        if "verifiers" in chosen:
            from bench.verifiers import bench_verifiers

            results += bench_verifiers(work, args.rounds)
        if "telemetry" in chosen:
            from bench.telemetry import bench_telemetry

            results += bench_telemetry(work, args.rounds)
        if "pg" in chosen:
            if args.pg:
                results += bench_pg(work, max(2, args.rounds // 3), args.pg)
            else:
                print("pg: skipped (pass --pg URL or set ORCHESTRATOR_TEST_PG_URL)")
        if "idle" in chosen or "wake" in chosen:
            from bench.wake import bench_idle, bench_wake

            if "idle" in chosen:
                results += bench_idle(work, args.rounds)
            if "wake" in chosen:
                results += bench_wake(work, 20, args.pg)
    targets = [ok for _, ok in results if ok is not None]
    print(f"\n{sum(targets)} of {len(targets)} targets met")


if __name__ == "__main__":
    main()
