"""`python -m bench.pools [--rounds N] [--tasks N] [--pg URL]`

Is the pool's lock a hotspot? 16 host processes (each its own project
folder and ORCHESTRATOR_HOST) tick `--jobs 2` against one PostgreSQL
database, like cron on 16 machines (a tick that finds nothing to claim
exits and the host ticks again), until every task is complete. Trivial
attempts (`/bin/true`, an echoed verdict), so the claims themselves are
what is measured. Each round runs the same tasks without a pool and with
all of them in one pool capped at 8, interleaved; a thread samples the
pool's open attempts from the database every 50 ms.

  claims per second, pool capped at 8 / no pool                    >= 0.5
  most attempts of the pool open at once (sampled)                 <= 8
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import threading
import time
import uuid
from pathlib import Path
from tempfile import TemporaryDirectory

from bench.__main__ import add_tasks, compile_package, orch

HOSTS = 16
CAP = 8
STAGE = """
[orchestrator]
database = "{url}"
workspace_root = "tasks"
state_root = "state"
lock_file = "orchestrator.lock"
retry_interval = 0
{pools}
[[pipelines.default.stages]]
name = "work"
{pool}worker = ["/bin/true"]
verifier = ["/bin/echo", "{{\\"pass\\": true, \\"score\\": 1.0}}"]
"""


def hosts(work: Path, url: str, pooled: bool) -> list[dict[str, str]]:
    config = STAGE.format(
        url=url,
        pools=f"[pools.agent]\nmax_running = {CAP}\n" if pooled else "",
        pool='pool = "agent"\n' if pooled else "",
    )
    envs = []
    for index in range(HOSTS):
        folder = work / f"{'pooled' if pooled else 'plain'}-{index}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "orchestrator.toml").write_text(config)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
        env["ORCHESTRATOR_CONFIG"] = str(folder / "orchestrator.toml")
        env["ORCHESTRATOR_HOST"] = f"bench-{index}"
        envs.append(env)
    return envs


def run_round(envs: list[dict[str, str]], url: str, tasks: int, prefix: str) -> tuple[float, int]:
    """(seconds until all `tasks` are complete, most pool attempts open at once)."""
    from sqlalchemy import create_engine, text

    add_tasks(envs[0], tasks, prefix=prefix)
    engine = create_engine(url, pool_size=HOSTS + 2)
    left = text("SELECT count(*) FROM tasks WHERE status <> 'complete'")
    open_pool = text("SELECT count(*) FROM attempts WHERE pool = 'agent' AND finished_at IS NULL")
    done = threading.Event()
    most = [0]
    errors: list[str] = []

    def sample() -> None:
        with engine.connect() as conn:
            while not done.is_set():
                most[0] = max(most[0], int(conn.execute(open_pool).scalar_one()))
                conn.commit()
                time.sleep(0.05)

    def cron(env: dict[str, str]) -> None:
        with engine.connect() as conn:
            while not done.is_set():
                proc = subprocess.run(
                    orch("tick", "--jobs", "2"),
                    env=env,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if proc.returncode != 0:
                    errors.append(proc.stderr[-400:])
                    return
                remaining = int(conn.execute(left).scalar_one())
                conn.commit()
                if remaining == 0:
                    return

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    threads = [threading.Thread(target=cron, args=(env,)) for env in envs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    done.set()
    sampler.join()
    engine.dispose()
    if errors:
        raise SystemExit(f"a tick failed: {errors[0]}")
    return elapsed, most[0]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pools", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=160)
    parser.add_argument("--pg", default=os.environ.get("ORCHESTRATOR_TEST_PG_URL"))
    args = parser.parse_args()
    if not args.pg:
        raise SystemExit("pass --pg URL or set ORCHESTRATOR_TEST_PG_URL")
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    compile_package()
    server = make_url(args.pg)
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    ratios: list[float] = []
    rates: list[tuple[float, float]] = []
    most = 0
    with TemporaryDirectory(prefix="orch-bench-pools-") as tmp:
        work = Path(tmp)
        urls = {}
        for kind in ("plain", "pooled"):
            name = f"orch_bench_{kind}_{uuid.uuid4().hex[:8]}"
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            urls[kind] = server.set(database=name).render_as_string(hide_password=False)
        try:
            envs = {kind: hosts(work, urls[kind], kind == "pooled") for kind in urls}
            for kind in urls:
                subprocess.run(
                    orch("db", "upgrade"), env=envs[kind][0], check=True, capture_output=True
                )
            for index in range(args.rounds):
                plain, _ = run_round(envs["plain"], urls["plain"], args.tasks, f"p{index}")
                pooled, seen = run_round(envs["pooled"], urls["pooled"], args.tasks, f"q{index}")
                most = max(most, seen)
                rates.append((args.tasks / plain, args.tasks / pooled))
                ratios.append(plain / pooled)  # (claims/s pooled) / (claims/s plain)
        finally:
            with admin.connect() as conn:
                for url in urls.values():
                    database = make_url(url).database
                    conn.execute(text(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
            admin.dispose()
    median = statistics.median(ratios)
    plain_rate = statistics.median(r[0] for r in rates)
    pooled_rate = statistics.median(r[1] for r in rates)
    print(
        f"{'claims/s, one pool capped at 8 / no pool (16 hosts x --jobs 2)':<66} "
        f"{median:5.2f}x  (min {min(ratios):.2f}, max {max(ratios):.2f}, n={len(ratios)}; "
        f"{pooled_rate:.1f} vs {plain_rate:.1f} claims/s)  target >= 0.5  "
        f"{'ok' if median >= 0.5 else 'MISSED'}"
    )
    print(
        f"{'most pool attempts open at once (sampled every 50 ms)':<66} {most:5d}   "
        f"target <= {CAP}  {'ok' if most <= CAP else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
