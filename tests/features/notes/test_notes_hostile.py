"""Hostile notes-stage workers: whatever the research stage does to the
worktree, none of it reaches the branch."""

from __future__ import annotations

import json

import pytest
from e2e.e2e_support import PASS, stage
from support import Project, git, make_repo

IMPLEMENT = "echo done > code.txt"
BASE = {".gitignore", "keep.txt", "gone.txt", "code.txt"}


def run(project: Project, research: str) -> tuple[set[str], str]:
    repo = make_repo(project.dir)
    project.write_config(
        '[pipelines.default]\nrepository = "repo"\nland = "merge"\n\n'
        + stage("research", worker=["sh", "-c", research], verifier=PASS, writes="notes")
        + stage("implement", worker=["sh", "-c", IMPLEMENT], verifier=PASS)
    )
    assert project.cli("add", "t1", "--title", "notes").exit_code == 0
    for _ in range(6):
        project.cli("tick")
        shown = json.loads(project.cli("show", "t1", "--json").output)
        if shown["status"] == "complete":
            break
    errors = " | ".join(str(a["error"]) for a in shown["attempts"])
    # Every file any commit on any branch holds: a notes stage adds none.
    ever = set(git(repo, "log", "--all", "--name-only", "--format=").split("\n")) - {""}
    return ever, errors + " status=" + shown["status"]


@pytest.mark.parametrize(
    "research",
    [
        "mkdir sub && cd sub && git init -q && echo x > f",  # a nested repository
        "echo new > added.txt && git add added.txt",  # staged, not in HEAD
        "echo new > added.txt && git add added.txt && echo more >> keep.txt",
        "mkdir d && ln -s /etc d/link && echo a > d/a",
        "echo x > ./-rf && echo y > ':(glob)*' && printf 'x' > \"$(printf 'a\\nb')\"",
        "mkfifo pipe.md",
        "rm keep.txt && mkdir keep.txt && echo in > keep.txt/f",  # a folder where a file was
        "rm gone.txt && ln -s /etc gone.txt",  # a link where a file was
        "echo x > c.txt && git add c.txt && git commit -qm c",  # the worker commits
        "echo 'gitdir: /nonexistent' > .git && echo x > n.md",  # a `.git` file rewritten
        "rm -rf .git && echo x > n.md",
        "mkdir s && echo 'gitdir: /nonexistent' > s/.git && echo x > s/n.md",
        # a file in the notes folder where a note's folder goes: the move fails
        'mkdir -p "$ORCHESTRATOR_NOTES"; touch "$ORCHESTRATOR_NOTES/d"; mkdir d; echo x > d/x',
    ],
)
def test_nothing_of_a_hostile_notes_stage_reaches_main(project: Project, research: str) -> None:
    on_main, errors = run(project, research)
    assert on_main <= BASE, errors


def test_what_the_worker_added_or_committed_is_kept_as_a_note(project: Project) -> None:
    research = "echo c > c.txt && git add c.txt"
    on_main, errors = run(
        project, research + " && git commit -qm c && echo a > added.txt && git add added.txt"
    )
    assert on_main <= BASE, errors
    notes = project.dir / "state" / "t1" / "notes"
    assert (notes / "c.txt").read_text() == "c\n"
    assert (notes / "added.txt").read_text() == "a\n"
