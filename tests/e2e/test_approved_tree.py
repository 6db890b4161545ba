"""What moves on past a gate is what the verifier judged (the stage commit),
plus the reviewer's edits the approver saw (bound by the approval hash);
never an edit made in the worktree after the verdict that nobody looked at.
Through the real CLI, a real repository and worktree, `land = "merge"`, on
both backends (the `project` fixture)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from e2e.e2e_support import PASS, stage
from support import Project, check_invariants, git, make_repo, write_config

GOOD = "echo good >> feature.txt"


def gated_landing(project: Project, *, then_review: bool = False) -> Path:
    """implement (gated) writes `good` into feature.txt; the task lands on
    main by merge (after a review stage that changes nothing, if asked)."""
    repo = make_repo(project.dir)
    stages = stage("implement", worker=["sh", "-c", GOOD], verifier=PASS, gate=True)
    if then_review:
        stages += stage("review", worker=["true"], verifier=PASS)
    config = '[pipelines.default]\nrepository = "repo"\nland = "merge"\n\n' + stages
    write_config(project.config, config)
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    done = project.run("tick")
    assert done.returncode == 0, done.stderr
    assert project.state("fix") == "implement:awaiting_approval"
    return repo


def worktree(project: Project) -> Path:
    return project.dir / "tasks" / "fix"


def append(project: Project, text: str) -> None:
    with (worktree(project) / "feature.txt").open("a") as out:
        out.write(text)


def shown_hash(project: Project) -> str:
    data = json.loads(project.run("show", "fix", "--json").stdout)
    value = data["approval_hash"]
    assert isinstance(value, str) and re.fullmatch(r"[0-9a-f]{16}", value)
    return value


def land(project: Project) -> None:
    for _ in range(3):
        done = project.run("tick")
        assert done.returncode == 0, done.stderr
        if project.state("fix") == "complete":
            break
    assert project.state("fix") == "complete"


def test_an_edit_after_the_verdict_is_refused_without_expect(project: Project) -> None:
    repo = gated_landing(project)
    append(project, "EVIL\n")  # after the verdict: nobody judged or saw it
    refused = project.run("approve", "fix")
    assert refused.returncode == 1, refused.stdout
    said = refused.stderr.strip()
    assert len(said.splitlines()) == 1
    assert "orchestrator diff fix" in said and "--expect" in said
    assert project.state("fix") == "implement:awaiting_approval"
    assert git(repo, "show", "main:keep.txt") == "keep\n"  # nothing moved


def test_an_edit_the_approver_saw_lands_with_expect(project: Project) -> None:
    repo = gated_landing(project)
    append(project, "seen by the reviewer\n")
    diff = project.run("diff", "fix").stdout
    assert "+seen by the reviewer" in diff
    done = project.run("approve", "fix", "--expect", shown_hash(project), "--by", "rev")
    assert done.returncode == 0, done.stderr
    land(project)
    assert git(repo, "show", "main:feature.txt") == "good\nseen by the reviewer\n"
    assert check_invariants(project.db_url) == []


def test_an_edit_after_show_printed_the_hash_refuses_expect(project: Project) -> None:
    gated_landing(project)
    seen = shown_hash(project)
    append(project, "EVIL\n")
    refused = project.run("approve", "fix", "--expect", seen)
    assert refused.returncode == 1
    assert "changed since you looked" in refused.stderr
    assert project.state("fix") == "implement:awaiting_approval"


def test_an_edit_after_a_plain_approval_does_not_land(project: Project) -> None:
    repo = gated_landing(project, then_review=True)
    judged = git(repo, "rev-parse", "task/fix").strip()
    done = project.run("approve", "fix")  # nothing beyond the stage commit: as before
    assert done.returncode == 0, done.stderr
    append(project, "EVIL\n")  # after the approval, before the next tick
    land(project)
    assert git(repo, "show", "main:feature.txt") == "good\n"
    assert "EVIL" not in git(repo, "log", "-p", "main")
    # The next stage worked on (and committed) exactly the approved tree.
    review = git(repo, "rev-parse", "task/fix~1").strip()
    assert review == judged
    # The late edit is kept, not lost, and out of the worktree.
    kept = git(repo, "show", "refs/orchestrator/fix/_after-approval:feature.txt")
    assert kept == "good\nEVIL\n"
    assert (worktree(project) / "feature.txt").read_text() == "good\n"
    assert check_invariants(project.db_url) == []


def test_an_edit_after_an_approval_with_expect_does_not_land(project: Project) -> None:
    repo = gated_landing(project)
    append(project, "seen by the reviewer\n")
    done = project.run("approve", "fix", "--expect", shown_hash(project))
    assert done.returncode == 0, done.stderr
    append(project, "EVIL\n")
    land(project)
    assert git(repo, "show", "main:feature.txt") == "good\nseen by the reviewer\n"
    assert "EVIL" not in git(repo, "log", "-p", "main")
    history = project.query(
        "SELECT reason FROM transitions WHERE event = 'approve' ORDER BY seq DESC"
    )
    approved = str(history[0][0]).split()[-1]
    assert git(repo, "show", f"{approved}:feature.txt") == "good\nseen by the reviewer\n"


def test_an_approved_commit_that_vanished_says_how_to_go_on(project: Project) -> None:
    """The commit an approval fixed is collected (its hidden ref deleted, a
    gc): no tick can move the gate on, and each says why and what to do
    (halt, resume: the stage runs again) instead of a bare git error."""
    repo = gated_landing(project)
    append(project, "reviewer\n")
    ok = project.run("approve", "fix", "--expect", shown_hash(project))
    assert ok.returncode == 0, ok.stderr
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/orchestrator/").split()
    pinned = [ref for ref in refs if "/_approved/" in ref]
    assert len(pinned) == 1, refs
    git(repo, "update-ref", "-d", pinned[0])
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "--prune=now", "-q")
    stuck = project.run("tick")
    assert "is gone from the repository" in stuck.stderr, stuck.stderr
    assert "orchestrator halt fix" in stuck.stderr
    assert project.state("fix") == "implement:approved"
    assert project.run("halt", "fix").returncode == 0
    assert project.run("resume", "fix").returncode == 0
    again = project.run("tick")
    assert again.returncode == 0, again.stderr
    assert project.state("fix") == "implement:awaiting_approval"
