"""Recorded histories with a known right answer, written by the
orchestrator itself: real ticks run a scripted worker and a scripted
verifier (a script in the project that prints the verdict planned for its
task), and scripted people approve or reject each gate through the
library face, as `orchestrator approve`/`reject` do. Nothing is inserted
by hand; only the plan (which score each task gets, who approves it) is
the test's."""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path

from support import Project, make_project

from orchestrator.api.project import Project as Library

VERDICT_SCRIPT = """\
import json, os, pathlib, sys
plan = json.loads(pathlib.Path(sys.argv[1]).read_text())
print(json.dumps(plan[os.environ["ORCHESTRATOR_TASK"]]))
"""


@dataclass(frozen=True)
class Planned:
    slug: str
    score: float | None
    approve: bool | None  # None: left waiting at the gate


def stage_toml(pipeline: str, project: Path) -> str:
    verifier = [sys.executable, str(project / "verdict.py"), str(project / "plan.json")]
    return (
        f"[[pipelines.{pipeline}.stages]]\n"
        'name = "review"\n'
        "gate = true\n"
        'worker = ["true"]\n'
        f"verifier = {json.dumps(verifier)}\n"
    )


def agreeing(prefix: str, n: int, agree: float, seed: int) -> list[Planned]:
    """Every verdict passes; people approve `agree` of them (exactly), and
    approved ones score higher on the whole (the ranges overlap)."""
    rng = random.Random(seed)
    approved = round(n * agree)
    plans = []
    for i in range(n):
        ok = i < approved
        score = rng.uniform(0.5, 1.0) if ok else rng.uniform(0.3, 0.8)
        plans.append(Planned(f"{prefix}-{i}", round(score, 2), ok))
    rng.shuffle(plans)
    return plans


def coin(prefix: str, n: int, seed: int) -> list[Planned]:
    """A verifier whose score says nothing: people toss a coin."""
    rng = random.Random(seed)
    return [
        Planned(f"{prefix}-{i}", round(rng.uniform(0.0, 1.0), 2), rng.random() < 0.5)
        for i in range(n)
    ]


def recorded(folder: Path, db_url: str, histories: dict[str, list[Planned]]) -> Project:
    """A project with one gated pipeline per history, every task ticked to
    its gate and decided by its planned person."""
    folder.mkdir(parents=True, exist_ok=True)
    stages = "\n".join(stage_toml(name, folder) for name in histories)
    project = make_project(folder, db_url, stages, retry_interval=0)
    (folder / "verdict.py").write_text(VERDICT_SCRIPT)
    plan: dict[str, dict[str, object]] = {}
    for plans in histories.values():
        for p in plans:
            plan[p.slug] = {"pass": True} | ({} if p.score is None else {"score": p.score})
    (folder / "plan.json").write_text(json.dumps(plan))
    lines = [
        json.dumps({"slug": p.slug, "title": p.slug, "pipeline": name})
        for name, plans in histories.items()
        for p in plans
    ]
    added = project.cli("add", "--from", "-", input="\n".join(lines))
    assert added.exit_code == 0, added.output
    with Library.open(project.config, db=db_url) as lib:
        result = lib.tick(jobs=2)
        assert result.exit_status == 0
        for plans in histories.values():
            for p in plans:
                if p.approve:
                    lib.approve(p.slug, by="alice")
                elif p.approve is not None:
                    lib.reject(p.slug, "not this", by="bob")
    return project
