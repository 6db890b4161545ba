"""Small frictions of a first day, through real processes: `explain` shows
the note of `reject --to … --note`; `approve --stage` says what approve
opens; `explain` does not promise scored attempts a run has no room for."""

from __future__ import annotations

import json

from e2e.e2e_support import stage
from support import Project

GATED = stage(
    "research", worker=["true"], verifier=["sh", "-c", 'echo \'{"pass": true, "score": 0.9}\'']
) + stage(
    "review",
    gate=True,
    worker=["true"],
    verifier=["sh", "-c", 'echo \'{"pass": true, "score": 0.9}\''],
)
NOTE = "split the parser first\nthen the tests"


def at_review_gate(project: Project) -> None:
    project.write_config(GATED)
    assert project.run("add", "t1", "--title", "x").returncode == 0
    for _ in range(3):  # research, then review, whichever ticks they take
        assert project.run("tick").returncode == 0
        if project.state("t1") == "review:awaiting_approval":
            return
    raise AssertionError(project.state("t1"))


def test_explain_shows_the_note_of_reject_to(project: Project) -> None:
    at_review_gate(project)
    done = project.run("reject", "t1", "--to", "research", "--note", NOTE, "--by", "ada")
    assert done.returncode == 0, done.stderr
    shown = project.run("explain", "t1").stdout
    assert "rejected  to research by ada" in shown
    assert "note: split the parser first" in shown and "note: then the tests" in shown
    data = json.loads(project.run("explain", "t1", "--json").stdout)
    assert data["rejected"]["note"] == NOTE and data["rejected"]["to"] == "research"
    assert data["rejected"]["by"] == "ada"
    # Once another run begins (research passed, review runs), it is history, not news.
    assert project.run("tick").returncode == 0
    assert project.state("t1") != "research"
    assert json.loads(project.run("explain", "t1", "--json").stdout)["rejected"] is None


def test_approve_stage_says_what_approve_opens(project: Project) -> None:
    at_review_gate(project)
    done = project.run("approve", "t1", "--stage", "review")
    assert done.returncode == 2
    assert "Did you mean" not in done.stderr
    assert "approve takes no --stage" in done.stderr and "reject SLUG --to STAGE" in done.stderr
    assert project.state("t1") == "review:awaiting_approval"


def test_explain_does_not_promise_attempts_the_run_has_not(project: Project) -> None:
    failing = ["sh", "-c", 'echo \'{"pass": false, "score": 0.1}\'']
    project.write_config(stage("s", worker=["true"], verifier=failing, max_attempts=1))
    assert project.run("add", "t1", "--title", "x").returncode == 0
    assert project.run("tick").returncode == 0
    assert project.state("t1") == "s:halted"
    shown = project.run("explain", "t1").stdout
    assert "attempts  1 of 1 used, 0 left" in shown
    assert "more scored attempt(s) before the rule may halt" not in shown
    assert "0 attempt(s) left in this run, so it cannot halt it" in shown
