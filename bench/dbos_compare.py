"""The `dbos` lane: 100 staged attempts as whole processes, against DBOS
Transact doing the same work and against the hand-written stdlib minimum.

Each round times, interleaved: an `orchestrator tick` of N ready tasks
(one stage: worker `/bin/true`, a verifier printing a verdict; the tasks
added beforehand, as cron finds them), a DBOS process running N workflows
of the same two subprocess steps on SQLite (`bench/dbos_flow.py`), and
`bench/minimal_tick.py` with N. DBOS is a bench-only extra
(`pip install -e '.[bench]'`); without it the lane says so and measures
nothing. Targets: tick / DBOS <= 0.45, tick / minimum <= 2.5.
"""

from __future__ import annotations

import importlib.util
import shutil
import sqlite3
from pathlib import Path

from bench.__main__ import BENCH, PY, add_tasks, orch, project, report, timed


def bench_dbos(work: Path, rounds: int, count: int = 100) -> list[tuple[str, bool | None]]:
    if importlib.util.find_spec("dbos") is None:
        print("dbos: skipped (DBOS Transact is not installed: pip install -e '.[bench]')")
        return []
    template = work / "dbos-template"
    env = project(template)
    add_tasks(env, count)
    flow = [PY, str(BENCH / "dbos_flow.py"), str(count)]
    minimal = [PY, str(BENCH / "minimal_tick.py"), str(count)]
    against_dbos, against_minimum = [], []
    for index in range(rounds):
        run = work / f"dbos-run-{index}"
        shutil.copytree(template, run)
        run_env = {**env, "ORCHESTRATOR_CONFIG": str(run / "orchestrator.toml")}
        dbos = timed([*flow, str(work / f"dbos-{index}.sqlite")], cwd=work)
        tick = timed(orch("tick"), env=run_env)
        least = timed([*minimal, str(work / f"least-{index}.db")])
        done = (
            sqlite3.connect(run / "orchestrator.db")
            .execute("SELECT count(*) FROM tasks WHERE status = 'complete'")
            .fetchone()[0]
        )
        if done != count:
            raise SystemExit(f"dbos bench: the tick completed {done} of {count} tasks")
        against_dbos.append(tick / dbos)
        against_minimum.append(tick / least)
    return [
        report(f"{count} staged attempts, whole process / DBOS Transact", against_dbos, 0.45),
        report(f"{count} staged attempts, whole process / stdlib minimum", against_minimum, 2.5),
    ]
