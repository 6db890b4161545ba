"""`orchestrator simulate` on runs recorded by real ticks: a scripted
verifier prints, attempt by attempt, the scores planned for its task (the
recorded rule is too patient to halt them), and the replay of
`--patience 2` is checked against a hand replay of the same rows, read
back from the database."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import Project, copy_database, make_project

from orchestrator.api.project import Project as Library

VERIFIER = """\
import json, os, pathlib, sys
plan = json.loads(pathlib.Path(sys.argv[1]).read_text())
scores = plan[os.environ["ORCHESTRATOR_TASK"]]
n = int(os.environ["ORCHESTRATOR_ATTEMPT"])
print(json.dumps({"pass": False, "score": scores[n - 1]}))
"""

PLAN = {
    "flat": [0.5, 0.5, 0.5, 0.5, 0.5, 0.5],  # halts after 3: saves 3, loses nothing
    "late": [0.4, 0.6, 0.5, 0.55, 0.9, 0.7],  # halts after 4: saves 2, loses 0.3
    "rising": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],  # never halts
}


def hand_replay(scores: list[float], patience: int, min_delta: float) -> tuple[int, float]:
    """(attempts saved, best lost): halt after attempt k once the last
    `patience` scores do not beat the best before them by min_delta."""
    for k in range(patience + 1, len(scores)):
        if max(scores[k - patience : k]) <= max(scores[: k - patience]) + min_delta:
            return len(scores) - k, max(0.0, max(scores) - max(scores[:k]))
    return 0, 0.0


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, template_db: Path) -> Project:
    folder = tmp_path_factory.mktemp("simulate")
    url = copy_database(template_db, folder / "orchestrator.db")
    stages = (
        "[[pipelines.default.stages]]\n"
        'name = "work"\n'
        'worker = ["true"]\n'
        f"verifier = {json.dumps([sys.executable, str(folder / 'v.py'), str(folder / 'p.json')])}\n"
        "max_attempts = 6\n"
        "plateau = { patience = 5, min_delta = 0.0 }\n"
    )
    project = make_project(folder, url, stages, retry_interval=0)
    (folder / "v.py").write_text(VERIFIER)
    (folder / "p.json").write_text(json.dumps(PLAN))
    lines = "\n".join(json.dumps({"slug": slug, "title": slug}) for slug in PLAN)
    assert project.cli("add", "--from", "-", input=lines).exit_code == 0
    with Library.open(project.config, db=url) as lib:
        for _ in range(20):
            if not lib.tasks("work"):
                break
            assert lib.tick().exit_status == 0
    assert {slug: project.state(slug) for slug in PLAN} == dict.fromkeys(PLAN, "work:halted")
    return project


def test_patience_2_equals_a_hand_replay_of_the_rows(recorded: Project) -> None:
    rows = recorded.query(
        "SELECT t.slug, a.score, a.cost_usd FROM attempts a JOIN tasks t ON t.id = a.task_id"
        " ORDER BY t.slug, a.number"
    )
    by_task: dict[str, list[float]] = {}
    for slug, score, _cost in rows:
        by_task.setdefault(slug, []).append(score)
    assert by_task == PLAN  # the rows hold what the verifier printed
    hand = [hand_replay(scores, 2, 0.0) for scores in by_task.values()]
    result = recorded.cli("simulate", "--patience", "2", "--min-delta", "0", "--json")
    assert result.exit_code == 0, result.output
    [rule] = json.loads(result.output)["rules"]
    assert rule["total"]["attempts_saved"] == sum(saved for saved, _ in hand) == 5
    assert rule["total"]["best_lost"] == pytest.approx(sum(lost for _, lost in hand))
    assert rule["total"]["best_lost"] == pytest.approx(0.3)
    assert rule["total"]["halted_earlier"] == 2
    assert rule["stages"][0]["stage"] == "work"


def test_grid_prints_a_table_and_suggests_a_rule_losing_nothing(recorded: Project) -> None:
    result = recorded.cli("simulate", "--patience", "2..3", "--min-delta", "0,0.05")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "over 3 runs"
    assert len([line for line in lines if line.startswith("  ") and line.strip()[0].isdigit()]) == 4
    # patience 3 halts "flat" after 4 (saves 2) and "late" never (0.9 at 5
    # beats 0.6): no best lost, whatever min_delta (of equal rules, the
    # first). patience 2 loses 0.3 on "late".
    assert lines[-1].startswith("suggested: patience 3, min_delta 0 ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--patience", "0", "--min-delta", "0"), "a patience is at least 1 attempt"),
        (("--patience", "x", "--min-delta", "0"), "write N, A..B or N,M"),
        (("--patience", "2", "--min-delta", "-1"), "each must be a finite number >= 0"),
    ],
)
def test_bad_rules_are_usage_errors(recorded: Project, args: tuple[str, ...], message: str) -> None:
    result = recorded.cli("simulate", *args)
    assert result.exit_code == 2
    assert message in result.output
