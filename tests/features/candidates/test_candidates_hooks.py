"""Candidates cost nothing where no stage runs them: the feature sets no
hook, so the claim, the record and recovery run as the engine alone; with
a stage of K, every point it needs is set."""

from __future__ import annotations

import subprocess
import sys

import pytest
from e2e.e2e_support import PASS, stage
from support import Project, make_repo
from tick.tick_support import make_bench

from orchestrator import compose

FEATURE = "orchestrator.features.candidates"

ONE = '[pipelines.default]\nrepository = "repo"\n\n' + stage("only", worker=["true"], verifier=PASS)
ROUNDS = '[pipelines.default]\nrepository = "repo"\n\n' + stage(
    "only", worker=["true"], verifier=PASS, candidates=3
)
POINTS = (
    "_claim_first",
    "_open_attempt",
    "_slot_of",
    "_decide_round",
    "_attempt_workspace",
    "_around_workspace",
    "_note_start",
    "_keep_work",
    "_after_recorded",
    "_after_recovery",
)


def _registry_points(project: Project, config: str) -> dict[str, int]:
    make_repo(project.dir)
    project.write_config(config)
    bench = make_bench(project)
    try:
        registry = compose.ticker(bench.settings, bench.engine).registry
    finally:
        bench.engine.dispose()
    assert "candidates" in registry.names
    return {point: len(getattr(registry, point)) for point in POINTS}


def test_no_stage_with_candidates_sets_no_hook(project: Project) -> None:
    points = _registry_points(project, ONE)
    assert points == dict.fromkeys(POINTS, 0)


def test_a_stage_of_k_sets_each_point(project: Project) -> None:
    points = _registry_points(project, ROUNDS)
    assert points == dict.fromkeys(POINTS, 1)


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_plain_tick_imports_none_of_the_feature_s_tick_modules(project: Project) -> None:
    make_repo(project.dir)
    project.write_config(ONE)
    assert project.cli("db", "upgrade").exit_code == 0
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    code = (
        "import sys\n"
        "from orchestrator.__main__ import main\n"
        "sys.argv = ['orchestrator', 'tick', '--jobs', '1']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        f"found = sorted(m for m in sys.modules if m.startswith({FEATURE!r}))\n"
        "print('candidates:', *found)\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code],
        env=project.process_env(),
        cwd=project.dir,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[-1] == f"candidates: {FEATURE}"
    assert project.query("SELECT outcome FROM attempts") == [("passed",)]
