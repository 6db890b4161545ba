"""A notes stage (`writes = "notes"`): what its attempt wrote is moved into
the task's notes folder, later stages read it there, and none of it reaches
the branch or `main` (real repository, real ticks through the CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e.e2e_support import PASS, stage
from support import Project, git, make_repo

from orchestrator.config import load_settings
from orchestrator.errors import ConfigError
from orchestrator.features.notes.config import NOTES_SECTION

RESEARCH = (
    "echo findings > RESEARCH.md; mkdir -p docs/n; echo deep > docs/n/more.md; "
    "echo changed > keep.txt; rm gone.txt; ln -s /etc/hostname link.md"
)
IMPLEMENT = 'cat > told.txt; cat "$ORCHESTRATOR_NOTES/RESEARCH.md" > code.txt'


def configure(project: Project) -> None:
    (project.dir / "implement.md").write_text("The plan is in {notes}/RESEARCH.md.\n")
    project.write_config(
        '[pipelines.default]\nrepository = "repo"\nland = "merge"\n\n'
        + stage("research", worker=["sh", "-c", RESEARCH], verifier=PASS, writes="notes")
        + stage(
            "implement",
            worker=["sh", "-c", IMPLEMENT],
            verifier=PASS,
            stdin="prompt",
            prompt="implement.md",
        )
    )


def tick_until_done(project: Project, slug: str) -> None:
    for _ in range(6):
        assert project.cli("tick").exit_code == 0
        shown = json.loads(project.cli("show", slug, "--json").output)
        if shown["status"] == "complete":
            return
    raise AssertionError(f"{slug} never completed: {shown['state']}")


def test_a_notes_stages_files_reach_the_next_stage_and_never_main(project: Project) -> None:
    repo = make_repo(project.dir)
    configure(project)
    assert project.cli("add", "t1", "--title", "notes").exit_code == 0
    tick_until_done(project, "t1")
    notes = project.dir / "state" / "t1" / "notes"
    assert (notes / "RESEARCH.md").read_text() == "findings\n"
    assert (notes / "docs" / "n" / "more.md").read_text() == "deep\n"
    assert (notes / "keep.txt").read_text() == "changed\n"  # a tracked file's change too
    assert not (notes / "link.md").exists()  # a link is not copied ...
    on_main = set(git(repo, "ls-tree", "-r", "--name-only", "main").split())
    assert on_main == {".gitignore", "keep.txt", "gone.txt", "code.txt", "told.txt"}
    assert git(repo, "show", "main:code.txt") == "findings\n"
    # The prompt names the folder too (`{notes}`): an agent without a shell reads it.
    assert git(repo, "show", "main:told.txt") == f"The plan is in {notes}/RESEARCH.md.\n"
    assert git(repo, "show", "main:keep.txt") == "keep\n"
    [research] = [
        a
        for a in json.loads(project.cli("show", "t1", "--json").output)["attempts"]
        if a["stage"] == "research"
    ]
    assert "note 'link.md' not kept (not a regular file)" in research["error"]


def test_a_code_stage_is_committed_as_before(project: Project) -> None:
    repo = make_repo(project.dir)
    project.write_config(
        '[pipelines.default]\nrepository = "repo"\nland = "merge"\n\n'
        + stage("work", worker=["sh", "-c", "echo findings > RESEARCH.md"], verifier=PASS)
    )
    assert project.cli("add", "t1", "--title", "code").exit_code == 0
    tick_until_done(project, "t1")
    assert git(repo, "show", "main:RESEARCH.md") == "findings\n"
    assert not (project.dir / "state" / "t1" / "notes").exists()


def test_writes_takes_code_or_notes(tmp_path: Path) -> None:
    config = tmp_path / "orchestrator.toml"
    body = '[pipelines.p]\nstages = [{name = "s", worker = ["true"], writes = "%s"}]\n'
    config.write_text(body % "notes", encoding="utf-8")
    [read] = load_settings(config=config).pipelines["p"].stages
    assert NOTES_SECTION.of(read) == "notes"
    config.write_text(body % "paper", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\(s\)\.writes: expected 'code' or 'notes'"):
        load_settings(config=config)


def test_a_folder_tasks_notes_stay_in_its_workspace_which_the_variable_names(
    project: Project,
) -> None:
    project.write_config(
        stage(
            "research",
            worker=["sh", "-c", "echo findings > RESEARCH.md"],
            writes="notes",
            verifier=PASS,
        )
        + stage("implement", worker=["sh", "-c", IMPLEMENT], verifier=PASS)
    )
    assert project.cli("add", "t1", "--title", "folder").exit_code == 0
    tick_until_done(project, "t1")
    workspace = project.dir / "tasks" / "t1"
    assert (workspace / "RESEARCH.md").read_text() == "findings\n"
    assert (workspace / "code.txt").read_text() == "findings\n"
