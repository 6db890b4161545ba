"""A pull request followed to its end, through real `tick` processes, the
real `gh` and a real bare remote, against the local look-alike of GitHub's
API (GitHub cannot run here; `features/landing/github_api.py`)."""

from __future__ import annotations

import os
import shutil

import pytest
from e2e.e2e_support import halt_reason
from features.landing.github_api import FakeGitHub
from features.review.review_support import follow_project, hints, origin_tip, tick
from support import Project, check_invariants, cli_json

pytestmark = pytest.mark.skipif(
    shutil.which("gh") is None and not os.environ.get("CI"), reason="gh is not installed"
)


def test_changes_requested_inline_goes_back_with_the_comment_and_the_fix_is_replied_to(
    project: Project, github: FakeGitHub
) -> None:
    origin = follow_project(project, github, poll_seconds=0, max_feedback_rounds=1)
    tick(project)
    assert project.state("t1") == "implement:held"
    assert len(github.created()) == 1
    first_tip = origin_tip(origin)
    pull = github.pull_state(1)
    github.rest.review(pull, "alice", "CHANGES_REQUESTED", "Please fix the time.")
    comment = github.rest.inline(pull, "alice", "Use UTC, not local time", "work.txt", 1, None)

    said = tick(project)  # read, sent back, fixed, landed on the same pull request, replied
    assert "review feedback sent it back to implement" in said
    assert project.state("t1") == "implement:held"
    hint = hints(project)[-1]
    assert "alice on work.txt:1" in hint and "Use UTC, not local time" in hint
    assert "changes requested: Please fix the time." in hint
    assert len(github.created()) == 1  # one pull request in all
    fixed = origin_tip(origin)
    assert fixed != first_tip
    replies = [c for c in pull.review_comments if c.get("in_reply_to_id") == comment]
    assert [r["body"] for r in replies] == [f"Addressed in {fixed[:12]}."]
    assert [c["body"] for c in pull.issue_comments] == [
        f"@alice: addressed in {fixed[:12]} (https://github.localhost/pull/1#review-{comment - 1})."
    ]
    rows = project.query(
        "SELECT kind, author, path, line, round, addressed_commit, attempt_id IS NOT NULL, "
        "replied_at IS NOT NULL FROM review_feedback ORDER BY id"
    )
    assert rows == [
        ("review", "alice", None, None, 1, fixed, True, True),
        ("inline", "alice", "work.txt", 1, 1, fixed, True, True),
    ]

    github.rest.conversation(pull, "bob", "Still wrong.")
    tick(project)  # a second round, past max_feedback_rounds = 1
    assert project.state("t1") == "implement:halted"
    assert halt_reason(project, "t1") == "feedback_rounds"
    explained = cli_json(project.cli("explain", "t1", "--json"))
    assert explained["review"]["open_feedback"] == [
        {
            "author": "bob",
            "body": "Still wrong.",
            "path": None,
            "line": None,
            "url": f"https://github.localhost/pull/1#issuecomment-{comment + 3}",
        }
    ]
    assert check_invariants(project.db_url) == []
