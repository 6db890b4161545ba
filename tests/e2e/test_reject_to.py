"""`reject --to STAGE`: a flaw found at a review goes back to the stage that
does the work, with the reviewer's note as that stage's hint.

Ticks run in-process; workers and verifiers are real processes, and the
reject itself is the real `orchestrator` command in its own process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_support import PASS, agent, stage
from support import Project, check_invariants, cli_json

pytestmark = pytest.mark.e2e

NOTE = "the off-by-one is still in pager.py line 12"


def tick(project: Project) -> None:
    result = project.cli("tick")
    assert result.exit_code == 0, (result.output, result.stderr)


def at_review(project: Project, tmp_path: Path) -> Path:
    """implement (prompted with {hint}) -> code_review [gate]; the task waits at
    the review's gate. Returns the worker's dump file."""
    prompts = project.dir / "prompts"
    prompts.mkdir()
    (prompts / "implement.md").write_text("Implement {task}.\nFix first: {hint}\n")
    dump = tmp_path / "implement.jsonl"
    project.write_config(
        stage(
            "implement",
            worker=agent("--dump", str(dump), "--arg={hint}"),
            verifier=PASS,
            prompt="prompts/implement.md",
        )
        + stage("code_review", worker=["true"], verifier=PASS, gate=True)
        + stage("docs", worker=["true"], verifier=PASS)
    )
    result = project.cli("add", "pager", "--title", "Page the results")
    assert result.exit_code == 0, result.output
    for _ in range(4):
        tick(project)
        if project.state("pager") == "code_review:awaiting_approval":
            return dump
    raise AssertionError(f"never reached the review gate: {project.state('pager')}")


def implement_attempts(project: Project) -> list[tuple[int, int, str]]:
    return [
        (int(number), int(run), str(hint))
        for number, run, hint in project.query(
            "SELECT number, run, hint FROM attempts WHERE stage = 'implement' ORDER BY number"
        )
    ]


def test_reject_to_implement_runs_implement_next_with_the_note(
    project: Project, tmp_path: Path
) -> None:
    dump = at_review(project, tmp_path)
    (first,) = implement_attempts(project)

    done = project.run("reject", "pager", "--note", NOTE, "--to", "implement", "--by", "rev")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pager: code_review:awaiting_approval -> implement"
    assert project.state("pager") == "implement"

    tick(project)
    _, (number, run, hint) = implement_attempts(project)
    assert hint == NOTE
    assert run > first[1]  # a new run: the plateau window and max_attempts start afresh
    folder = project.dir / "state" / "pager" / f"implement-{number:03d}"
    assert f"Fix first: {NOTE}" in (folder / "prompt.md").read_text()
    context = json.loads((folder / "context.json").read_text())
    assert context["attempt"]["hint"] == NOTE and context["attempt"]["run"] == run
    assert context["history"] == []  # the earlier run's attempts do not count
    assert context["plateau"]["scores"] == []
    assert [n["note"] for n in context["notes"] if n["event"] == "reject"] == [NOTE]
    worker_saw = [json.loads(line) for line in dump.read_text().splitlines()]
    assert any(f"--arg={NOTE}" in rec.get("argv", []) for rec in worker_saw)

    rows = json.loads(project.run("history", "pager", "--json").stdout)
    (reject,) = [r for r in rows if r["event"] == "reject"]
    assert (reject["from_state"], reject["to_state"]) == (
        "code_review:awaiting_approval",
        "implement",
    )
    assert reject["reason"] == "rejected to implement" and reject["note"] == NOTE
    table = project.run("history", "pager").stdout
    assert "rejected to implement" in table

    # From implement the task comes back to the review, which runs again.
    for _ in range(3):
        if project.state("pager") == "code_review:awaiting_approval":
            break
        tick(project)
    assert project.state("pager") == "code_review:awaiting_approval"
    assert check_invariants(project.db_url) == []


def test_reject_to_its_own_stage_is_todays_reject(project: Project, tmp_path: Path) -> None:
    at_review(project, tmp_path)
    done = project.run("reject", "pager", "--note", NOTE, "--to", "code_review")
    assert done.returncode == 0, done.stderr
    assert project.state("pager") == "code_review"
    shown = cli_json(project.cli("show", "pager", "--json"))
    assert shown["next_hint"] == NOTE and shown["transitions"][-1]["reason"] == "rejected"


@pytest.mark.parametrize("to", ["docs", "nosuch", "complete", "code_review:running"])
def test_reject_to_a_stage_that_is_not_earlier_is_refused(
    project: Project, tmp_path: Path, to: str
) -> None:
    at_review(project, tmp_path)
    before = project.counts()
    done = project.run("reject", "pager", "--note", NOTE, "--to", to)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1  # one line
    assert done.stderr.startswith("Error: reject --to")
    assert "choose one of: implement, code_review" in done.stderr
    assert project.state("pager") == "code_review:awaiting_approval"
    assert project.counts() == before


def test_reject_to_away_from_a_gate_says_what_reject_needs(
    project: Project, tmp_path: Path
) -> None:
    at_review(project, tmp_path)
    assert project.run("approve", "pager").returncode == 0
    done = project.run("reject", "pager", "--note", NOTE, "--to", "implement")
    assert done.returncode == 1
    assert "reject needs `:awaiting_approval`" in done.stderr
