"""`show` prints each stage's score curve."""

from __future__ import annotations

import json

from support import Project

from orchestrator.views.sparkline import score_lines, sparkline

# Scores 0.3, 0.6, 0.9; passes at the third attempt.
VERIFY = (
    "import json, os; n = int(os.environ['ORCHESTRATOR_ATTEMPT']); "
    "print(json.dumps({'pass': n >= 3, 'score': round(0.3 * n, 1)}))"
)
RISING = f"""
[[pipelines.default.stages]]
name = "research"
max_attempts = 5
worker = ["true"]
verifier = {json.dumps(["python3", "-c", VERIFY])}
"""


def test_sparkline_scales_and_marks_missing_scores() -> None:
    assert sparkline([0.0, 0.5, 1.0]) == "▁▅█"
    assert sparkline([0.2, None, 0.9]) == "▂·▇"
    assert sparkline([None]) == "·"
    assert score_lines(
        [
            {"stage": "a", "outcome": "failed", "score": 0.1},
            {"stage": "a", "outcome": "passed", "score": 0.9},
            {"stage": "b", "outcome": None, "score": None},
        ]
    ) == ["a ▂▇ 0.1 → 0.9"]
    # Rechecks of a pending verdict are no points of the curve (there may be
    # hundreds); an attempt that judged nothing else still shows as a dot.
    waits = [{"stage": "ci", "outcome": "pending", "score": None}] * 50
    assert score_lines(
        [
            {"stage": "ci", "outcome": "failed", "score": 0.5},
            *waits,
            {"stage": "ci", "outcome": "invalid_verdict", "score": None},
            {"stage": "ci", "outcome": "passed", "score": 1.0},
        ]
    ) == ["ci ▅·█ 0.5 → 1"]


def test_show_prints_the_score_curve(project: Project) -> None:
    project.write_config(RISING)
    assert project.cli("add", "t1", "--title", "climb").exit_code == 0
    for _ in range(3):
        assert project.cli("tick").exit_code == 0
    assert project.state("t1") == "complete"
    shown = project.cli("show", "t1")
    assert shown.exit_code == 0
    assert "  scores    research ▃▅▇ 0.3 → 0.9  best #3" in shown.output.splitlines()
