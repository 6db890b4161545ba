"""A pull request followed to its end, through real `tick` processes, the
real `gh` and a real bare remote, against the local look-alike of GitHub's
API (GitHub cannot run here; `features/landing/github_api.py`)."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from e2e.e2e_support import halt_reason
from features.landing.github_api import FakeGitHub
from features.landing.pr_support import pushes, trace_file
from features.review.review_support import follow_project, hints, origin_tip, tick
from support import Project, check_invariants, cli_json, git

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
    given = json.loads((project.dir / "tasks" / "feedback.json").read_text())
    assert given[1] == {
        "author": "alice",
        "body": "Use UTC, not local time",
        "path": "work.txt",
        "line": 1,
        "url": f"https://github.localhost/pull/1#discussion_r{comment}",
    }
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


def test_an_unchanged_pull_request_polled_ten_times_costs_ten_304s_and_nothing_else(
    project: Project, github: FakeGitHub
) -> None:
    follow_project(project, github, poll_seconds=0)
    tick(project)
    assert project.state("t1") == "implement:held"
    before = len(github.logged())
    for _ in range(5):  # each tick reads it before and after its claims
        tick(project)
    calls = github.logged()[before:]
    assert len(calls) == 10
    assert all(c["status"] == 304 and c["if_none_match"] for c in calls), calls
    assert {(c["method"], c["path"]) for c in calls} == {("GET", "/repos/octo/widget/pulls/1")}
    assert project.state("t1") == "implement:held"


def test_poll_seconds_bounds_how_often_it_is_read(project: Project, github: FakeGitHub) -> None:
    follow_project(project, github, poll_seconds=3600)
    tick(project)
    read = len(github.rest_calls())
    github.rest.conversation(github.pull_state(1), "alice", "Not yet read")
    tick(project)
    tick(project)
    assert len(github.rest_calls()) == read
    assert project.state("t1") == "implement:held"


def test_a_failing_check_sends_it_back_with_its_name_and_a_merge_completes_it(
    project: Project, github: FakeGitHub
) -> None:
    follow_project(project, github, poll_seconds=0)
    github.set_checks("task/t1", {"build": "pending", "lint": "pending"})
    tick(project)
    assert project.state("t1") == "implement:held"
    github.set_checks("task/t1", {"build": "success", "lint": "failure"})
    tick(project)  # the pull request is unchanged (304); its pending checks are read again
    hint = hints(project)[-1]
    assert "check lint failure" in hint and "build" not in hint
    assert project.state("t1") == "implement:held"  # fixed and pushed again
    github.set_checks("task/t1", {"build": "success", "lint": "success"})
    pull = github.pull_state(1)
    pull.merged, pull.state, pull.merge_commit_sha = True, "closed", "ab" * 20
    pull.updated += 1
    said = tick(project)
    assert "t1: pull request merged -> complete" in said
    assert project.state("t1") == "complete"
    assert project.query("SELECT landed_commit FROM tasks") == [("ab" * 20,)]
    assert not (project.dir / "tasks" / "t1").exists()
    assert git(project.dir / "repo", "branch", "--list", "task/t1").strip() == ""
    kinds = project.query("SELECT kind FROM events ORDER BY id")
    assert kinds.count(("landed",)) == 1
    assert check_invariants(project.db_url) == []


def test_a_closed_pull_request_halts_the_task_pr_closed_naming_who(
    project: Project, github: FakeGitHub
) -> None:
    follow_project(project, github, poll_seconds=0)
    tick(project)
    pull = github.pull_state(1)
    pull.state, pull.closed_by = "closed", "bob"
    pull.updated += 1
    tick(project)
    assert project.state("t1") == "implement:halted"
    assert halt_reason(project, "t1") == "pr_closed"
    reason = project.query("SELECT reason FROM transitions ORDER BY id DESC LIMIT 1")[0][0]
    assert (
        reason
        == "pull request http://github.localhost/octo/widget/pull/1 closed without merge by bob"
    )


def test_a_failing_gh_is_the_hosts_fault_and_charges_nothing(
    project: Project, github: FakeGitHub
) -> None:
    follow_project(project, github, poll_seconds=0)
    tick(project)
    attempts_before = project.query("SELECT count(*) FROM attempts")
    github.rest.conversation(github.pull_state(1), "alice", "Please rename it")
    tick(project, GH_TOKEN="revoked")
    assert project.state("t1") == "implement:held"
    assert project.query("SELECT count(*) FROM attempts") == attempts_before
    explained = cli_json(project.cli("explain", "t1", "--json"))["review"]
    assert "GitHub answered 401" in explained["fault"]
    tick(project)  # the token back: the comment is read, and the fault cleared
    assert "Please rename it" in hints(project)[-1]
    assert cli_json(project.cli("explain", "t1", "--json"))["review"]["fault"] is None


def test_a_huge_comment_with_escapes_and_bots_and_own_comments(
    project: Project, github: FakeGitHub
) -> None:
    follow_project(project, github, poll_seconds=0)
    tick(project)
    pull = github.pull_state(1)
    github.rest.conversation(pull, "dependabot[bot]", "Bump everything")
    github.rest.conversation(pull, "octo", "A note from the orchestrator's own account")
    tick(project)
    assert project.state("t1") == "implement:held"  # neither is feedback
    huge = "\x1b[31mred\x1b[0m <script>alert(1)</script> " + "x" * 1_000_000
    github.rest.conversation(pull, "alice", huge)
    tick(project)
    hint = hints(project)[-1]
    # No escape reaches the agent (gh itself shows one as `^[`); HTML is text.
    assert "\x1b" not in hint and "red^[[0m <script>alert(1)</script>" in hint, hint[:300]
    assert len(hint) < 25_000
    (kept,) = project.query("SELECT length(body) FROM review_feedback WHERE author = 'alice'")
    assert kept == (65536,)
    authors = project.query("SELECT author FROM review_feedback ORDER BY id")
    assert authors == [("alice",)]


def test_killed_between_pushing_the_fix_and_replying_one_push_one_reply(
    project: Project, github: FakeGitHub
) -> None:
    origin = follow_project(project, github, poll_seconds=0)
    project.env["GIT_TRACE2_EVENT"] = str(trace_file(project.dir))
    tick(project)
    assert pushes(project.dir) == 1
    pull = github.pull_state(1)
    comment = github.rest.inline(pull, "alice", "Off by one", "work.txt", 1, None)
    tick(project, rc=137, ORCHESTRATOR_TEST_FAULT="pr_after_push:exit")
    assert pushes(project.dir) == 2  # the fix is on the pull request's branch
    assert [c for c in pull.review_comments if c.get("in_reply_to_id")] == []
    tick(project)
    assert pushes(project.dir) == 2  # nothing pushed twice
    replies = [c["body"] for c in pull.review_comments if c.get("in_reply_to_id") == comment]
    assert replies == [f"Addressed in {origin_tip(origin)[:12]}."]
    tick(project)
    assert len([c for c in pull.review_comments if c.get("in_reply_to_id")]) == 1
    assert len(github.created()) == 1
    assert project.state("t1") == "implement:held"


def test_without_follow_pr_a_pull_request_completes_the_task_as_before(
    project: Project, github: FakeGitHub
) -> None:
    follow_project(project, github, follow_pr=False)
    tick(project)
    assert project.state("t1") == "complete"
    assert project.query("SELECT pr_url FROM tasks") == [(github.pulls[0].url,)]
    assert github.rest_calls() == []  # nothing read after it opened
    tables = "SELECT count(*) FROM sqlite_master WHERE name LIKE 'review_%'"
    if project.db_url.startswith("sqlite"):
        assert project.query(tables) == [(0,)]  # no table made for a feature nobody uses
