"""`python -m bench.web_board [--rounds N]`: the web board's cost as the database grows.

Renders the board page (queries and template, in process: what `serve`
does per request) of a database with 100,000 tasks and 1,000,000 attempts
against one with 100 tasks and 1,000 attempts, measured interleaved in the
same run, and prints the median ratio. Both databases hold the same mix:
1% waiting at a gate, 1% halted, 1% ready, the rest complete. Target: <= 1.3,
which only paging meets (a page reads 100 rows through the status index,
counts stop at 1,000). Times are the render's CPU time (median of 11 in
each child): on a machine shared with other jobs, wall-clock time measures
the neighbours.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.__main__ import ONE_STAGE, orch, project

TARGET = 1.3


def populate(db: Path, tasks: int, attempts_per_task: int) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN")

    def status(i: int) -> str:
        return {0: "awaiting_approval", 1: "halted", 2: "ready"}.get(i % 100, "complete")

    def stamp(i: int) -> str:
        return f"2026-01-01 {i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000000"

    conn.executemany(
        "INSERT INTO tasks (id, slug, title, body, pipeline, priority, stage, status, run,"
        " version, next_hint, created_at, updated_at, halt_reason) VALUES (?, ?, 'bench', '',"
        " 'default', 0, ?, ?, 1, 1, '', ?, ?, ?)",
        (
            (
                i,
                f"task-{i}",
                "complete" if status(i) == "complete" else "work",
                status(i),
                stamp(i),
                stamp(i),
                "manual" if status(i) == "halted" else None,
            )
            for i in range(1, tasks + 1)
        ),
    )
    conn.executemany(
        "INSERT INTO attempts (task_id, stage, run, number, outcome, pass, score, hint,"
        " lease_token, lease_expires_at, host, boot_id, tick_pid, started_at, finished_at)"
        " VALUES (?, 'work', 1, ?, 'failed', 0, ?, '', 'x', ?, 'bench', 'b', 1, ?, ?)",
        (
            (i, n, n / attempts_per_task, stamp(i), stamp(i), stamp(i))
            for i in range(1, tasks + 1)
            for n in range(1, attempts_per_task + 1)
        ),
    )
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.close()


def render_seconds(folder: Path) -> float:
    """One board render, timed in a fresh child (no cache shared between sizes)."""
    code = (
        "import time, sys\n"
        "from orchestrator.config import load_settings\n"
        "from orchestrator.storage.db import make_engine\n"
        "from orchestrator.web.pages import Pages\n"
        "from orchestrator.web.render import Links\n"
        "s = load_settings(config=sys.argv[1])\n"
        "pages = Pages(make_engine(s.database_url), s)\n"
        "pages.board(Links())  # warm: imports, template compile, connection\n"
        "best = []\n"
        "for _ in range(11):\n"
        "    t = time.process_time(); html = pages.board(Links())\n"
        "    best.append(time.process_time() - t)\n"
        "assert 'awaiting_approval' in html\n"
        "print(sorted(best)[5])  # the median of 11\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(folder / "orchestrator.toml")],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(done.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.web_board", description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="orch-bench-web-") as tmp:
        work = Path(tmp)
        big, small = work / "big", work / "small"
        project(big, ONE_STAGE)
        project(small, ONE_STAGE)
        print("  (populating 100,000 tasks and 1,000,000 attempts ...)", flush=True)
        populate(big / "orchestrator.db", 100_000, 10)
        populate(small / "orchestrator.db", 100, 10)
        subprocess.run(orch("--version"), check=True, capture_output=True)
        ratios, big_times, small_times = [], [], []
        for _ in range(args.rounds):
            reference = render_seconds(small)
            measured = render_seconds(big)
            small_times.append(reference)
            big_times.append(measured)
            ratios.append(measured / reference)
        median = statistics.median(ratios)
        print(
            f"board render, 100k tasks + 1M attempts / 100 tasks + 1k attempts: "
            f"{median:.2f}x (min {min(ratios):.2f}, max {max(ratios):.2f}, n={len(ratios)}; "
            f"{statistics.median(big_times) * 1000:.1f} ms / "
            f"{statistics.median(small_times) * 1000:.1f} ms)  target <= {TARGET}  "
            f"{'ok' if median <= TARGET else 'MISSED'}"
        )
        sys.exit(0 if median <= TARGET else 1)


if __name__ == "__main__":
    main()
