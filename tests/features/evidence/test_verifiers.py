"""`orchestrator verifiers` on histories recorded by real ticks and
scripted people (`histories.py`), each figure against its known answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from histories import Planned, agreeing, coin, recorded
from support import Project, copy_database


def run(project: Project, *args: str) -> tuple[int, str]:
    result = project.cli("verifiers", *args)
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory, template_db: Path) -> Project:
    folder = tmp_path_factory.mktemp("evidence")
    url = copy_database(template_db, folder / "orchestrator.db")
    return recorded(
        folder / "proj",
        url,
        {"good": agreeing("g", 200, 0.9, seed=41), "random": coin("r", 200, seed=7)},
    )


def by_pipeline(reports: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["pipeline"]: r for r in reports}


def test_agreeing_verifier_is_measured_and_not_at_chance(history: Project) -> None:
    code, out = run(history, "--json")
    assert code == 0, out
    good = by_pipeline(json.loads(out))["good"]
    assert good["decisions"] == 200
    assert abs(good["agreement"] - 0.9) <= 0.02
    assert good["at_chance"] is False
    assert good["auc"]["low"] > 0.5


def test_random_verifier_is_flagged_at_chance(history: Project) -> None:
    done = history.run("verifiers", "--json", "--pipeline", "random")  # a real process
    assert done.returncode == 0, done.stderr
    [report] = json.loads(done.stdout)
    assert report["pipeline"] == "random" and report["decisions"] == 200
    assert report["auc"]["low"] <= 0.5 <= report["auc"]["high"]
    assert report["at_chance"] is True


def test_text_report_names_each_stage_and_flags_chance(history: Project) -> None:
    code, out = run(history)
    assert code == 0, out
    good, random_ = out.split("\n\n")
    assert good.startswith("good/review") and "decisions 200" in good
    assert "agreement 0.900" in good and "AT CHANCE" not in good
    assert random_.startswith("random/review") and "AT CHANCE" in random_
    assert "recall - (only passing verdicts reached people)" in good


def test_since_keeps_later_decisions_only(history: Project) -> None:
    code, out = run(history, "--json", "--since", "2999-01-01")
    assert code == 0
    assert [(r["pipeline"], r["decisions"]) for r in json.loads(out)] == [
        ("good", 0),
        ("random", 0),
    ]
    code, out = run(history, "--json", "--since", "2000-01-01")
    assert sum(r["decisions"] for r in json.loads(out)) == 400


def test_a_stage_without_decisions_says_so(tmp_path: Path, template_db: Path) -> None:
    url = copy_database(template_db, tmp_path / "orchestrator.db")
    project = recorded(tmp_path / "proj", url, {"quiet": [Planned("waits", 0.7, None)]})
    code, out = run(project, "--stage", "review")
    assert code == 0
    head, said = out.strip().splitlines()
    assert head.startswith("quiet/review  (verifier ")
    assert said == "  no decisions yet: nobody approved or rejected a verdict here"
    code, out = run(project, "--json")
    [report] = json.loads(out)
    assert (code, report["decisions"], report["auc"], report["at_chance"]) == (0, 0, None, None)
    assert report["agreement"] is None and report["best_threshold"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--pipeline", "nope"), "--pipeline 'nope': no such pipeline (the config has quiet)"),
        (("--stage", "nope"), "--stage 'nope': no such stage in any pipeline"),
        (("--since", "yesterday"), "--since 'yesterday': not a date"),
    ],
)
def test_bad_filters_are_usage_errors(
    tmp_path: Path, template_db: Path, args: tuple[str, ...], message: str
) -> None:
    url = copy_database(template_db, tmp_path / "orchestrator.db")
    project = recorded(tmp_path / "proj", url, {"quiet": [Planned("waits", 0.7, None)]})
    code, out = run(project, *args)
    assert code == 2
    assert out.startswith(f"Error: {message}")
