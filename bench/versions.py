"""Pinned versions cost (`python -m bench --only versions`).

A tick over 1,000 trivial tasks added on 10 pipeline versions (the config
edited between each 100 `add`s, so 900 of them run a version rebuilt from
the host's kept copy) against a tick over 1,000 tasks on one version, the
two interleaved round by round in one run, each on a fresh copy of its
prepared project:

  tick, 1,000 tasks on 10 versions / on 1 version                    <= 1.1
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from bench.__main__ import add_tasks, orch, project, report, timed

TASKS = 1000
VERSIONS = 10

CONFIG = """
[orchestrator]
workspace_root = "tasks"
state_root = "state"
lock_file = "orchestrator.lock"
retry_interval = 0

[[pipelines.default.stages]]
name = "work"
worker = ["/bin/true", "v{version}"]
verifier = ["/bin/echo", "{{\\"pass\\": true, \\"score\\": 1.0}}"]
"""


def _prepare(folder: Path, versions: int) -> dict[str, str]:
    env = project(folder, CONFIG.format(version=0))
    per = TASKS // versions
    for version in range(versions):
        (folder / "orchestrator.toml").write_text(CONFIG.format(version=version))
        add_tasks(env, per, prefix=f"v{version}")
    return env


def _tick(template: Path, env: dict[str, str], run: Path) -> float:
    shutil.copytree(template, run)
    config = str(run / "orchestrator.toml")
    elapsed = timed(orch("tick"), env={**env, "ORCHESTRATOR_CONFIG": config})
    with sqlite3.connect(run / "orchestrator.db") as db:
        done = db.execute("SELECT count(*) FROM tasks WHERE status = 'complete'").fetchone()[0]
    if done != TASKS:
        raise SystemExit(f"versions bench: only {done} of {TASKS} tasks completed")
    return elapsed


def bench_versions(work: Path, rounds: int) -> list[tuple[str, bool]]:
    many, one = work / "versions-many", work / "versions-one"
    many_env, one_env = _prepare(many, VERSIONS), _prepare(one, 1)
    ratios = []
    for index in range(rounds):
        reference = _tick(one, one_env, work / f"versions-one-{index}")
        measured = _tick(many, many_env, work / f"versions-many-{index}")
        ratios.append(measured / reference)
    return [report(f"tick, {TASKS} tasks on {VERSIONS} versions / on 1 version", ratios, 1.1)]
