"""A task is a branch: a pipeline with `repository` and no setup, through
real ticks on a real repository (worktree, stage commits, crash points)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from e2e.e2e_support import PASS, execute, stage
from support import Project, check_invariants, git, make_repo, run_orchestrator, write_config

# Commits one file itself, changes one, adds one, deletes one; leaves a log
# file the repository ignores. Run again (after a kill), it does no more.
IMPLEMENT = (
    "echo committed > committed.txt && git add committed.txt && "
    "(git diff --cached --quiet || "
    "git -c user.name=w -c user.email=w@w commit -q -m 'the worker commits') && "
    "echo changed > keep.txt && echo new > untracked.txt && rm -f gone.txt && "
    "echo noise > debug.log"
)


def branch_project(project: Project, implement: str = IMPLEMENT) -> Path:
    repo = make_repo(project.dir)
    stages = stage("implement", worker=["sh", "-c", implement], verifier=PASS)
    stages += stage("code_review", worker=["true"], verifier=PASS, gate=True)
    write_config(project.config, '[pipelines.default]\nrepository = "repo"\n\n' + stages)
    return repo


def test_each_passed_stage_is_one_commit_on_the_task_branch(project: Project) -> None:
    repo = branch_project(project)
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    base = git(repo, "rev-parse", "main").strip()
    assert project.query("SELECT branch, base_branch FROM tasks") == [("task/fix", "main")]
    for _ in range(2):
        done = project.run("tick")
        assert done.returncode == 0, done.stderr
    assert project.state("fix") == "code_review:awaiting_approval"
    workspace = project.dir / "tasks" / "fix"
    assert git(workspace, "branch", "--show-current").strip() == "task/fix"
    log = git(repo, "log", "--format=%s", f"{base}..task/fix").splitlines()
    assert log == [
        "fix: code_review (attempt 1)",
        "fix: implement (attempt 1)",
        "the worker commits",
    ]
    changed = git(repo, "diff", "--name-status", base, "task/fix")
    assert sorted(changed.splitlines()) == [
        "A\tcommitted.txt",
        "A\tuntracked.txt",
        "D\tgone.txt",
        "M\tkeep.txt",
    ]
    assert (workspace / "debug.log").exists()  # ignored: in the folder, in no commit
    recorded = project.query("SELECT stage, commit_sha FROM attempts ORDER BY id")
    tips = git(repo, "log", "--format=%H", "-n", "2", "task/fix").split()
    assert recorded == [("implement", tips[1]), ("code_review", tips[0])]
    assert project.query("SELECT base_commit FROM tasks") == [(base,)]
    assert git(repo, "rev-parse", "main").strip() == base  # the base is never touched
    assert check_invariants(project.db_url) == []


def test_the_base_is_the_branch_checked_out_at_add(project: Project) -> None:
    repo = branch_project(project)
    git(repo, "checkout", "-q", "-b", "develop")
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    git(repo, "checkout", "-q", "main")
    assert project.query("SELECT base_branch FROM tasks") == [("develop",)]


def test_a_repository_that_is_not_one_is_a_config_error(project: Project) -> None:
    branch_project(project)
    text = project.config.read_text().replace('repository = "repo"', 'repository = "nowhere"')
    project.config.write_text(text)
    done = project.run("add", "fix", "--title", "Fix it")
    assert done.returncode == 78
    assert "repository" in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("point", ["after_base_recorded", "after_worktree_add"])
def test_a_kill_while_the_worktree_is_made_is_finished_by_the_next_tick(
    project: Project, point: str
) -> None:
    repo = branch_project(project)
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    killed = project.run("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": point})
    assert killed.returncode != 0
    for _ in range(3):
        project.run("tick")
    assert project.state("fix") == "code_review:awaiting_approval"
    assert git(repo, "worktree", "list").count("[task/fix]") == 1
    assert len(git(repo, "log", "--format=%H", "main..task/fix").split()) == 3
    assert check_invariants(project.db_url) == []


def test_a_kill_between_the_stage_commit_and_its_record_commits_once(project: Project) -> None:
    repo = branch_project(project)
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    killed = project.run(
        "tick",
        extra_env={"ORCHESTRATOR_TEST_FAULT": "after_stage_commit"},
    )
    assert killed.returncode != 0
    for _ in range(4):
        project.run("tick")
    rows = project.query("SELECT stage, number, outcome, error FROM attempts ORDER BY id")
    assert project.state("fix") == "code_review:awaiting_approval", rows
    subjects = git(repo, "log", "--format=%s", "main..task/fix").splitlines()
    # The killed attempt's commit stays; the rerun adds its own, empty one,
    # never a second copy of the work.
    changes = git(repo, "log", "--format=%s", "--name-only", "main..task/fix")
    assert changes.count("untracked.txt") == 1
    assert subjects[0] == "fix: code_review (attempt 1)"
    assert check_invariants(project.db_url) == []


def test_diff_shows_the_whole_change_and_one_stages_part(project: Project) -> None:
    branch_project(project)
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    assert project.run("tick").returncode == 0  # implement passes: committed
    workspace = project.dir / "tasks" / "fix"
    (workspace / "late.txt").write_text("after the stage\n")  # untracked, uncommitted
    whole = project.run("diff", "fix")
    assert whole.returncode == 0, whole.stderr
    for name in ("committed.txt", "untracked.txt", "gone.txt", "keep.txt", "late.txt"):
        assert f"b/{name}" in whole.stdout or f"a/{name}" in whole.stdout, name
    assert "deleted file mode" in whole.stdout and "debug.log" not in whole.stdout
    stat = project.run("diff", "fix", "--stat")
    assert "5 files changed" in stat.stdout
    part = project.run("diff", "fix", "--stage", "implement")
    assert "b/committed.txt" in part.stdout and "late.txt" not in part.stdout
    # The worker's index is as it was.
    assert git(workspace, "status", "--porcelain") == "?? late.txt\n"
    shown = project.run("show", "fix")
    assert "branch    task/fix (from main)" in shown.stdout
    assert f"worktree  {workspace}" in shown.stdout


def test_diff_of_a_folder_task_says_it_is_not_a_branch(project: Project) -> None:
    write_config(project.config, stage("implement", worker=["true"], verifier=PASS))
    assert project.run("add", "plain", "--title", "T").returncode == 0
    done = project.run("diff", "plain")
    assert done.returncode == 1 and "not a branch" in done.stderr
    assert project.run("diff", "nope").returncode == 1


def finish(project: Project, slug: str) -> Path:
    """Run a branch task to `complete` (approving its gate)."""
    assert project.run("add", slug, "--title", "Fix it").returncode == 0
    for _ in range(2):
        project.run("tick")
    assert project.run("approve", slug, "--by", "t").returncode == 0
    project.run("tick")
    assert project.state(slug) == "complete"
    return project.dir / "tasks" / slug


def test_prune_finished_removes_worktrees_and_keeps_branches(project: Project) -> None:
    repo = branch_project(project)
    workspace = finish(project, "fix")
    tip = git(repo, "rev-parse", "task/fix").strip()
    dry = project.run("prune", "--finished", "--dry-run")
    assert dry.returncode == 0 and "would remove worktree" in dry.stdout and workspace.exists()
    done = project.run("prune", "--finished")
    assert done.returncode == 0, done.stderr
    assert f"removed worktree {workspace} (branch task/fix stays)" in done.stdout
    assert not workspace.exists() and git(repo, "rev-parse", "task/fix").strip() == tip
    assert "task/fix" not in git(repo, "worktree", "list")
    shown = project.run("show", "fix").stdout
    assert "(removed)" in shown and tip[:12] in shown
    assert "4 files changed" in project.run("diff", "fix", "--stat").stdout  # from the branch
    again = project.run("prune", "--finished")
    assert again.returncode == 0 and "removed" not in again.stdout


def test_prune_needs_older_than_or_finished(project: Project) -> None:
    done = project.run("prune")
    assert done.returncode == 2 and "--older-than" in done.stderr  # a usage error


def test_keep_worktree_days_removes_them_at_a_tick(project: Project) -> None:
    branch_project(project)
    text = project.config.read_text().replace(
        'repository = "repo"', 'repository = "repo"\nkeep_worktree_days = 1'
    )
    project.config.write_text(text)
    workspace = finish(project, "fix")
    project.run("tick")
    assert workspace.exists()  # finished just now: kept
    execute(project, "UPDATE tasks SET updated_at = '2000-01-01 00:00:00.000000'")
    assert project.run("tick").returncode == 0
    assert not workspace.exists()


def test_explain_says_where_a_finished_change_is(project: Project) -> None:
    repo = branch_project(project)
    workspace = finish(project, "fix")
    tip = git(repo, "rev-parse", "task/fix").strip()
    said = project.run("explain", "fix").stdout
    assert f"branch    task/fix from main, last commit {tip[:12]}" in said
    assert f"worktree  {workspace}" in said and "git merge task/fix" in said
    data = json.loads(project.run("explain", "fix", "--json").stdout)["change"]
    assert data == {
        "branch": "task/fix",
        "base_branch": "main",
        "base_commit": git(repo, "rev-parse", "main").strip(),
        "last_commit": tip,
        "workspace": str(workspace),
        "worktree": True,
        "landed_commit": None,  # `land = "none"`: the change stays on its branch
        "pr_url": None,
    }
    assert json.loads(project.run("show", "fix", "--json").stdout)["change"] == data


@pytest.mark.parametrize("agent", [None, "claude", "codex", "aider", "script"])
def test_init_repository_writes_a_branch_pipeline(tmp_path: Path, agent: str | None) -> None:
    repo = make_repo(tmp_path)
    (repo / "src").mkdir()
    folder = tmp_path / "tasks-project"
    folder.mkdir()
    argv = ["init", "--repository", str(repo / "src")]
    argv += ["--agent", agent] if agent else []
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    done = run_orchestrator(argv, cwd=folder, env=env)
    assert done.returncode == 0, done.stderr
    text = (folder / "orchestrator.toml").read_text()
    assert f'\nrepository = "{repo}"\n' in text and "setup =" not in text
    added = run_orchestrator(["add", "t1", "--title", "T"], cwd=folder, env=env)
    assert added.returncode == 0, added.stderr


def test_init_refuses_a_repository_that_is_not_one(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    done = run_orchestrator(["init", "--repository", str(tmp_path)], cwd=tmp_path, env=env)
    assert done.returncode == 1 and "--repository" in done.stderr
    assert not (tmp_path / "orchestrator.toml").exists()


def test_the_gate_shows_the_whole_change_then_the_stages_part(project: Project) -> None:
    branch_project(project)
    text = project.config.read_text().replace(
        'worker = ["true"]', 'worker = ["sh", "-c", "echo looks fine > REVIEW.md"]'
    )
    project.config.write_text(text)
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    for _ in range(2):
        assert project.run("tick").returncode == 0
    assert project.state("fix") == "code_review:awaiting_approval"
    data = json.loads(project.run("show", "fix", "--json").stdout)
    whole = sorted(map(tuple, data["gate_changes"]["whole"]["files"]))
    assert whole == [
        ("A", "REVIEW.md"),
        ("A", "committed.txt"),
        ("A", "untracked.txt"),
        ("D", "gone.txt"),
        ("M", "keep.txt"),
    ]
    assert data["gate_changes"]["stage"]["files"] == [["A", "REVIEW.md"]]
    shown = project.run("show", "fix").stdout
    assert "whole change  5 files since" in shown and "this stage    1 file since" in shown
    assert "D gone.txt" in shown and "A REVIEW.md" in shown
    # The hash binds what the worktree would commit: a new file changes it.
    before = data["approval_hash"]
    (project.dir / "tasks" / "fix" / "sneaky.py").write_text("print('hi')\n")
    after = json.loads(project.run("show", "fix", "--json").stdout)
    assert after["approval_hash"] != before
    assert ["A", "sneaky.py"] in after["gate_changes"]["whole"]["files"]
    stale = project.run("approve", "fix", "--expect", before)
    assert stale.returncode == 1 and "changed since you looked" in stale.stderr
    assert project.run("approve", "fix", "--expect", after["approval_hash"]).returncode == 0


def test_the_gate_shows_text_the_worker_marked_binary_in_info_attributes(
    project: Project,
) -> None:
    # The repository's .git/info/attributes is the worker's to write (it is
    # the worktree's common folder) and is never shown: `-diff` there would
    # blank the page's diff of every file.
    hide = "echo '* -diff' > \"$(git rev-parse --git-common-dir)/info/attributes\" && "
    branch_project(project, hide + IMPLEMENT)
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    for _ in range(2):
        assert project.run("tick").returncode == 0
    assert project.state("fix") == "code_review:awaiting_approval"
    page = project.dir / "report.html"
    assert project.run("report", "--html", str(page)).returncode == 0
    assert "+changed" in page.read_text("utf-8")


@pytest.mark.parametrize(
    "leave",
    [
        "git checkout -q --detach",  # a detached HEAD
        "git checkout -q -b elsewhere",  # another branch in the worktree
    ],
)
def test_a_worker_that_moves_head_off_the_branch_loses_no_work(
    project: Project, leave: str
) -> None:
    repo = branch_project(project, implement=f"{leave} && echo work > work.txt")
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    workspace = project.dir / "tasks" / "fix"
    for _ in range(2):
        project.run("tick")
    # The stage's commit never lands beside the branch, and the worker's
    # folder is never removed to make the worktree again.
    assert (workspace / "work.txt").read_text() == "work\n"
    errors = [e for (e,) in project.query("SELECT error FROM attempts") if e]
    assert errors and all("task/fix" in e for e in errors), errors
    assert git(repo, "log", "--format=%s", "main..task/fix") == ""
    assert project.query("SELECT commit_sha FROM attempts WHERE commit_sha IS NOT NULL") == []
    assert check_invariants(project.db_url) == []


def test_a_project_reached_through_a_link_makes_its_commits(project: Project) -> None:
    repo = branch_project(project)
    link = project.dir.parent / "project-link"
    link.symlink_to(project.dir)
    through = {"ORCHESTRATOR_CONFIG": str(link / project.config.name)}
    assert project.run("add", "fix", "--title", "Fix it", extra_env=through).returncode == 0
    for _ in range(2):
        done = project.run("tick", extra_env=through)
        assert done.returncode == 0, done.stderr
    rows = project.query("SELECT stage, outcome, error FROM attempts ORDER BY id")
    assert project.state("fix") == "code_review:awaiting_approval", rows
    assert len(git(repo, "log", "--format=%H", "main..task/fix").split()) == 3
    assert (project.dir / "tasks" / "fix" / "untracked.txt").exists()


def test_a_trailer_already_in_the_base_is_not_this_attempts_commit(project: Project) -> None:
    # A repository outlives a database: a task of an earlier project, also
    # called `fix`, was landed on main with its trailers.
    repo = branch_project(project, implement="echo work > work.txt")
    git(repo, "commit", "-q", "--allow-empty", "-m", "old\n\nOrchestrator-Attempt: fix/implement/1")
    git(
        repo, "commit", "-q", "--allow-empty", "-m", "old\n\nOrchestrator-Attempt: fix/implement/10"
    )
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    assert project.run("tick").returncode == 0  # implement, then code_review
    (sha,) = project.query("SELECT commit_sha FROM attempts WHERE stage = 'implement'")[0]
    assert sha == git(repo, "rev-parse", "task/fix~1").strip()
    assert git(repo, "log", "--format=%s", "main..task/fix").splitlines() == [
        "fix: code_review (attempt 1)",
        "fix: implement (attempt 1)",
    ]
    assert "work.txt" in git(repo, "show", "--name-only", "--format=", sha)


def test_prune_finished_keeps_a_worktree_with_work_no_commit_holds(project: Project) -> None:
    repo = branch_project(project)
    workspace = finish(project, "fix")
    (workspace / "late.txt").write_text("a person's fix after the last stage\n")
    done = project.run("prune", "--finished")
    assert (workspace / "late.txt").read_text() == "a person's fix after the last stage\n"
    assert f"kept worktree {workspace}" in done.stderr
    assert "task/fix" in git(repo, "worktree", "list")
    (workspace / "late.txt").unlink()  # nothing left outside the branch: it goes
    assert "removed worktree" in project.run("prune", "--finished").stdout
    assert not workspace.exists()


def test_a_worktree_swapped_for_a_link_is_never_followed(project: Project) -> None:
    outside = project.dir.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not the task's\n")
    swap = f"cd .. && rm -rf fix && ln -s '{outside}' fix"
    repo = branch_project(project, implement=swap)
    text = project.config.read_text().replace(
        'worker = ["true"]', 'worker = ["sh", "-c", "echo review > review.txt"]'
    )
    project.config.write_text(text)
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    for _ in range(2):
        project.run("tick")
    branch_files = git(repo, "log", "--format=", "--name-only", "main..task/fix")
    assert "secret.txt" not in branch_files
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]  # no stage ran there
    errors = [e for (e,) in project.query("SELECT error FROM attempts") if e]
    assert errors and all("link" in e for e in errors), errors
    assert "secret.txt" not in project.run("diff", "fix").stdout


@pytest.mark.parametrize("slug", ["fix.lock", "fix."])
def test_a_slug_git_cannot_name_a_branch_is_refused_at_add(project: Project, slug: str) -> None:
    branch_project(project)
    done = project.run("add", slug, "--title", "Fix it")
    assert done.returncode == 1 and "branch" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert project.query("SELECT slug FROM tasks") == []


def test_a_trailer_the_worker_forges_does_not_stand_for_the_stage_commit(
    project: Project,
) -> None:
    """The worker commits one file under the trailer it guesses for its
    attempt, and leaves another uncommitted: the stage's own commit still
    holds the rest, by the orchestrator's identity."""
    forge = (
        "echo a > forged.txt && git add forged.txt && "
        "git -c user.name=w -c user.email=w@w commit -q -m 'looks like a stage' "
        "-m 'Orchestrator-Attempt: fix/implement/1' && echo b > left.txt"
    )
    repo = branch_project(project, implement=forge)
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    assert project.run("tick").returncode == 0
    [(sha,)] = project.query("SELECT commit_sha FROM attempts WHERE stage = 'implement'")
    shown = git(repo, "show", "--name-only", "--format=%an%n%s", sha).split()
    assert shown[:1] == ["orchestrator"] and "left.txt" in shown


def test_what_a_reviewer_changes_at_the_gate_is_committed_when_approved(
    project: Project,
) -> None:
    repo = branch_project(project)
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    for _ in range(2):
        project.run("tick")
    assert project.state("fix") == "code_review:awaiting_approval"
    before = git(repo, "rev-parse", "task/fix").strip()
    (project.dir / "tasks" / "fix" / "keep.txt").write_text("the reviewer's fix\n")
    # An edit beyond the stage commit is approved only as seen (its hash).
    assert project.run("approve", "fix", "--by", "rev").returncode == 1
    seen = json.loads(project.run("show", "fix", "--json").stdout)["approval_hash"]
    assert project.run("approve", "fix", "--by", "rev", "--expect", seen).returncode == 0
    assert project.run("tick").returncode == 0
    assert project.state("fix") == "complete"
    assert git(repo, "log", "--format=%s", "-n", "1", "task/fix").strip() == (
        "fix: code_review approved, with the reviewer's changes"
    )
    assert git(repo, "show", "task/fix:keep.txt") == "the reviewer's fix\n"
    assert git(repo, "rev-parse", "task/fix~1").strip() == before


def test_an_approval_that_changed_nothing_adds_no_commit(project: Project) -> None:
    repo = branch_project(project)
    finish(project, "fix")
    assert git(repo, "log", "--format=%s", "-n", "1", "task/fix").strip() == (
        "fix: code_review (attempt 1)"
    )
