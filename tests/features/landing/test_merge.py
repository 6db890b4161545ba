"""`land = "merge"` alone, on real repositories: a real rebase, real
conflicts, a real check, the compare-and-set on the base branch, and a
second call after a kill at each step finishing the landing once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import git, make_repo

from orchestrator.features.landing.merge import land_merge
from orchestrator.features.landing.model import Landed, LandRequest, Refused, SendBack


def task_branch(repo: Path, slug: str, files: dict[str, str]) -> Path:
    """A task's worktree on `task/<slug>` from main, with one commit of `files`."""
    worktree = repo.parent / "tasks" / slug
    worktree.parent.mkdir(exist_ok=True)
    git(repo, "worktree", "add", "-q", "-b", f"task/{slug}", str(worktree), "main")
    for name, text in files.items():
        (worktree / name).write_text(text)
    git(worktree, "add", ".")
    git(worktree, "commit", "-qm", f"{slug}: implement")
    return worktree


def request(repo: Path, slug: str, check: tuple[str, ...] | None = None) -> LandRequest:
    env = {"PATH": os.environ["PATH"], "HOME": str(repo.parent)}
    return LandRequest(
        slug=slug,
        title=slug,
        body="",
        repository=repo,
        worktree=repo.parent / "tasks" / slug,
        branch=f"task/{slug}",
        base_branch="main",
        check=check,
        env=env,
        timeout=30,
    )


def tip(repo: Path, ref: str) -> str:
    return git(repo, "rev-parse", ref).strip()


def parents(repo: Path, ref: str) -> list[int]:
    return [len(line.split()) - 1 for line in git(repo, "log", "--format=%H %P", ref).splitlines()]


def test_two_branches_of_different_files_both_land_in_a_line(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    task_branch(repo, "a", {"a.txt": "a\n"})
    task_branch(repo, "b", {"b.txt": "b\n"})
    log = tmp_path / "checked"
    check = ("sh", "-c", f'git rev-parse HEAD >> "{log}"')
    first = land_merge(request(repo, "a", check))
    second = land_merge(request(repo, "b", check))
    assert isinstance(first, Landed) and isinstance(second, Landed)
    assert tip(repo, "main") == second.commit == tip(repo, "task/b")
    assert git(repo, "show", "main:a.txt") == "a\n" and git(repo, "show", "main:b.txt") == "b\n"
    assert set(parents(repo, "main")) == {0, 1}  # no merge commit: a line
    assert log.read_text().split() == [first.commit, second.commit]  # each rebased tip checked
    # The main checkout had main checked out and was clean: it follows.
    assert (repo / "b.txt").read_text() == "b\n"
    assert git(repo, "status", "--porcelain") == ""


def test_the_same_lines_conflict_and_the_branch_stays_as_it_was(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    task_branch(repo, "a", {"keep.txt": "from a\n"})
    worktree = task_branch(repo, "b", {"keep.txt": "from b\n"})
    before = tip(repo, "task/b")
    assert isinstance(land_merge(request(repo, "a")), Landed)
    main = tip(repo, "main")
    outcome = land_merge(request(repo, "b"))
    assert isinstance(outcome, SendBack)
    assert outcome.files == ("keep.txt",)
    assert "keep.txt" in outcome.hint
    assert tip(repo, "task/b") == before and tip(repo, "main") == main
    assert git(worktree, "status", "--porcelain") == ""
    assert not (repo / ".git" / "worktrees" / "b" / "rebase-merge").exists()


def test_a_failing_check_sends_back_its_output_tail_and_resets_the_branch(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    task_branch(repo, "a", {"a.txt": "a\n"})
    task_branch(repo, "b", {"b.txt": "b\n"})
    assert isinstance(land_merge(request(repo, "a")), Landed)
    before, main = tip(repo, "task/b"), tip(repo, "main")
    noisy = "for i in $(seq 1 3000); do echo line $i; done; echo 'FAILED test_b' >&2; exit 3"
    outcome = land_merge(request(repo, "b", ("sh", "-c", noisy)))
    assert isinstance(outcome, SendBack)
    assert "exited 3" in outcome.hint and "FAILED test_b" in outcome.hint
    assert "line 3000" in outcome.hint and "line 1\n" not in outcome.hint  # the tail
    assert tip(repo, "task/b") == before and tip(repo, "main") == main


def test_a_second_call_after_the_ref_moved_lands_nothing_twice(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    task_branch(repo, "a", {"a.txt": "a\n"})
    log = tmp_path / "checked"
    check = ("sh", "-c", f'git rev-parse HEAD >> "{log}"')
    first = land_merge(request(repo, "a", check))
    again = land_merge(request(repo, "a", check))
    assert first == again
    assert len(log.read_text().split()) == 1  # recognised as landed: not checked again
    assert git(repo, "reflog", "--format=%gs", "main").count("orchestrator: land") == 1


def test_a_branch_rebased_by_a_killed_call_is_not_rebased_again(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    task_branch(repo, "a", {"a.txt": "a\n"})
    worktree = task_branch(repo, "b", {"b.txt": "b\n"})
    assert isinstance(land_merge(request(repo, "a")), Landed)
    git(worktree, "rebase", "-q", "main")  # what the killed call did before the ref move
    rebased = tip(repo, "task/b")
    outcome = land_merge(request(repo, "b"))
    assert outcome == Landed(commit=rebased)
    assert tip(repo, "main") == rebased


def test_a_rebase_killed_half_way_is_aborted_first(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    task_branch(repo, "a", {"keep.txt": "from a\n"})
    worktree = task_branch(repo, "b", {"keep.txt": "from b\n", "b.txt": "b\n"})
    before = tip(repo, "task/b")
    assert isinstance(land_merge(request(repo, "a")), Landed)
    with pytest.raises(Exception):  # noqa: B017 - git's own failure, any kind
        git(worktree, "rebase", "-q", "main")  # stops in the conflict, as a kill would leave it
    outcome = land_merge(request(repo, "b"))
    assert isinstance(outcome, SendBack) and outcome.files == ("keep.txt",)
    assert tip(repo, "task/b") == before


def test_a_checkout_of_the_base_with_local_changes_refuses(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    task_branch(repo, "a", {"a.txt": "a\n"})
    (repo / "keep.txt").write_text("a person's edit\n")
    main = tip(repo, "main")
    outcome = land_merge(request(repo, "a"))
    assert isinstance(outcome, Refused)
    assert "checked out" in outcome.reason and "local changes" in outcome.reason
    assert tip(repo, "main") == main
    assert (repo / "keep.txt").read_text() == "a person's edit\n"


def test_a_base_nobody_has_checked_out_moves_alone(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    task_branch(repo, "a", {"a.txt": "a\n"})
    git(repo, "checkout", "-q", "-b", "elsewhere")
    (repo / "keep.txt").write_text("untouched\n")
    outcome = land_merge(request(repo, "a"))
    assert isinstance(outcome, Landed) and tip(repo, "main") == outcome.commit
    assert (repo / "keep.txt").read_text() == "untouched\n"


def test_an_untracked_file_in_the_way_in_the_base_checkout_refuses_before_the_ref_moves(
    tmp_path: Path,
) -> None:
    """The checkout is clean for `status --untracked-files=no`, but the
    landing adds a file an untracked one stands in the way of: moving the
    ref and then failing to update the checkout would leave its index at
    the old tip, a commit there undoing the landing."""
    repo = make_repo(tmp_path)
    task_branch(repo, "a", {"a.txt": "a\n"})
    (repo / "a.txt").write_text("a person's own file\n")
    main = tip(repo, "main")
    outcome = land_merge(request(repo, "a"))
    assert isinstance(outcome, Refused), outcome
    assert "a.txt" in outcome.reason
    assert tip(repo, "main") == main
    assert (repo / "a.txt").read_text() == "a person's own file\n"
    assert git(repo, "status", "--porcelain", "--untracked-files=no").strip() == ""


def test_a_merge_driver_the_worker_wrote_runs_nothing_in_the_rebase(tmp_path: Path) -> None:
    """A worker that can write the shared config and `info/attributes`
    names a merge driver (a command) for every file; the landing's rebase
    merges a file both sides changed, and must not run it."""
    repo = make_repo(tmp_path)
    (repo / "keep.txt").write_text("one\ntwo\nthree\nfour\nfive\n")
    git(repo, "commit", "-qam", "five lines")
    worktree = task_branch(repo, "a", {"a.txt": "a\n"})
    (worktree / "keep.txt").write_text("ONE\ntwo\nthree\nfour\nfive\n")
    git(worktree, "commit", "-qam", "a: the first line")
    (repo / "keep.txt").write_text("one\ntwo\nthree\nfour\nFIVE\n")
    git(repo, "commit", "-qam", "meanwhile: the last line")
    marker = tmp_path / "ran"
    git(repo, "config", "merge.evil.driver", f"touch {marker}; git merge-file %A %O %B")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("* merge=evil\n")
    outcome = land_merge(request(repo, "a"))
    assert not marker.exists()
    assert isinstance(outcome, Landed), outcome
    assert (worktree / "keep.txt").read_text() == "ONE\ntwo\nthree\nfour\nFIVE\n"


def test_a_branch_sharing_no_history_with_the_base_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    worktree = task_branch(repo, "a", {"a.txt": "a\n"})
    git(worktree, "checkout", "-q", "--orphan", "unrelated")
    git(worktree, "commit", "-qm", "a history of its own")
    git(worktree, "branch", "-q", "-f", "task/a", "unrelated")
    git(worktree, "checkout", "-q", "task/a")
    main = tip(repo, "main")
    outcome = land_merge(request(repo, "a"))
    assert isinstance(outcome, Refused)
    assert "task/a shares no history with main" in outcome.reason
    assert tip(repo, "main") == main


@pytest.mark.parametrize("head", ["detached", "another branch"])
def test_a_worktree_off_its_branch_is_refused_and_nothing_moves(tmp_path: Path, head: str) -> None:
    repo = make_repo(tmp_path)
    worktree = task_branch(repo, "a", {"a.txt": "a\n"})
    if head == "detached":
        git(worktree, "checkout", "-q", "--detach")
    else:
        git(worktree, "checkout", "-q", "-b", "elsewhere")
    main = tip(repo, "main")
    outcome = land_merge(request(repo, "a"))
    assert isinstance(outcome, Refused)
    said = "a detached HEAD" if head == "detached" else "refs/heads/elsewhere"
    assert f"has {said} checked out, not task/a" in outcome.reason
    assert tip(repo, "main") == main


def count_git(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The subcommands of every git process the landing starts, from here on."""
    from orchestrator.workspace import gitrun

    calls: list[str] = []
    real = gitrun.run_bounded

    def counted(argv, env, limit, deadline):  # type: ignore[no-untyped-def]
        calls.append(next(a for a in argv[1:] if not a.startswith("-") and "/" not in a))
        return real(argv, env, limit, deadline)

    monkeypatch.setattr(gitrun, "run_bounded", counted)
    return calls


@pytest.mark.parametrize("checked_out", [True, False])
def test_a_rebasing_landing_starts_at_most_eight_git_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checked_out: bool
) -> None:
    """5 when the base is not checked out; the checkout's `status` and two
    `read-tree`s when it is. The rebased tip comes with the worktree list."""
    repo = make_repo(tmp_path)
    task_branch(repo, "a", {"a.txt": "a\n"})
    task_branch(repo, "b", {"b.txt": "b\n"})
    assert isinstance(land_merge(request(repo, "a")), Landed)
    if not checked_out:
        git(repo, "checkout", "-q", "--detach")
    calls = count_git(monkeypatch)
    landed = land_merge(request(repo, "b"))
    assert isinstance(landed, Landed) and landed.commit == tip(repo, "main")
    assert tip(repo, "main") == tip(repo, "task/b")
    head = ["config", "rev-parse", "rebase", "worktree"]
    follow = ["status", "read-tree", "update-ref", "read-tree"] if checked_out else ["update-ref"]
    assert calls == head + follow


def test_what_lands_is_the_tip_the_check_ran_on_not_one_it_made(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    task_branch(repo, "a", {"a.txt": "a\n"})
    worktree = task_branch(repo, "b", {"b.txt": "b\n"})
    assert isinstance(land_merge(request(repo, "a")), Landed)
    log = tmp_path / "checked"
    sneak = (
        f'git rev-parse HEAD >> "{log}"; echo sneaked > s.txt; git add s.txt; '
        "git -c user.name=x -c user.email=x@x commit -qm sneak"
    )
    landed = land_merge(request(repo, "b", ("sh", "-c", sneak)))
    assert isinstance(landed, Landed)
    assert landed.commit == log.read_text().strip() == tip(repo, "main")
    assert git(repo, "show", "main:b.txt") == "b\n"
    assert "s.txt" not in git(repo, "ls-tree", "--name-only", "main")
    assert tip(worktree, "HEAD") != landed.commit  # the check's commit stays on the branch
