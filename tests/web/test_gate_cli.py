"""The approval hash on the command line, and `report --html`, on both backends."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from support import Project


def _hash(project: Project, slug: str) -> str:
    shown = project.cli("show", slug)
    assert shown.exit_code == 0, shown.output
    found = re.search(r"approval\s+([0-9a-f]{16})", shown.stdout)
    assert found, shown.stdout
    return found.group(1)


def _at_gate(project: Project, slug: str = "g") -> None:
    assert project.cli("add", slug, "--title", "Gate me").exit_code == 0
    assert project.run("tick").returncode == 0
    assert project.state(slug) == "research:awaiting_approval"


def test_show_hash_is_stable_and_approve_expect_checks_it(project: Project) -> None:
    _at_gate(project)
    seen = _hash(project, "g")
    assert _hash(project, "g") == seen  # nothing changed: the same hash
    shown = project.cli("show", "g", "--json")
    assert f'"approval_hash": "{seen}"' in shown.stdout

    workspace = project.dir / "tasks" / "g"
    (workspace / "result.txt").write_text("written after the review\n")
    refused = project.cli("approve", "g", "--expect", seen)
    assert refused.exit_code == 1
    assert "changed since you looked" in refused.stderr
    assert project.state("g") == "research:awaiting_approval"

    fresh = _hash(project, "g")
    assert fresh != seen
    done = project.cli("approve", "g", "--expect", fresh, "--by", "carol")
    assert done.exit_code == 0, done.stderr
    assert project.state("g") == "research:approved"
    again = project.cli("approve", "g", "--expect", fresh)  # harmless, as without --expect
    assert again.exit_code == 0
    assert "already approved" in again.stdout


def test_hash_follows_a_git_workspace_diff(project: Project) -> None:
    _at_gate(project)
    workspace = project.dir / "tasks" / "g"

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(workspace), *args], check=True, capture_output=True)

    git("init", "-q")
    (workspace / "README.md").write_text("# Title\n")
    git("add", "README.md")
    git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "one")
    clean = _hash(project, "g")
    (workspace / "README.md").write_text("# Title\n\nA new line.\n")
    edited = _hash(project, "g")
    assert edited != clean
    from orchestrator.config import load_settings
    from orchestrator.storage.db import make_engine
    from orchestrator.views.gate import gate_view

    settings = load_settings(config=str(project.config), db_url=project.db_url)
    engine = make_engine(project.db_url)
    try:
        view = gate_view(engine, settings, "g")
    finally:
        engine.dispose()
    assert view.changes.kind == "git"
    assert "+A new line." in view.changes.diff
    assert view.digest == edited


def test_report_html_is_one_self_contained_file(project: Project) -> None:
    _at_gate(project)
    title = "<script>alert(1)</script>"
    assert project.cli("add", "x", "--title", title).exit_code == 0
    out = project.dir / "report.html"
    done = project.cli("report", "--html", str(out))
    assert done.exit_code == 0, done.stderr
    text = out.read_text("utf-8")
    assert "<script" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)  # nothing fetched
    assert '<link rel="stylesheet"' not in text and "<style>" in text
    assert 'id="gate-g"' in text and 'id="task-x"' in text
    assert "<svg" in text  # the gate's score curve, inline
    assert _hash(project, "g") in text


GIT_AS_T = ("git", "-c", "user.name=t", "-c", "user.email=t@example.invalid")


def _git(workspace: Path, *args: str) -> None:
    subprocess.run(
        [
            "git",
            "-C",
            str(workspace),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            *args,
        ],
        check=True,
        capture_output=True,
    )


def _git_workspace(project: Project, slug: str = "g") -> Path:
    workspace = project.dir / "tasks" / slug
    _git(workspace, "init", "-q")
    (workspace / "plan.txt").write_text("one\n")
    _git(workspace, "add", "plan.txt")
    _git(workspace, "commit", "-qm", "one")
    return workspace


def test_diff_content_cannot_show_a_markdown_file_outside_the_workspace(
    project: Project,
) -> None:
    # review finding: workspace_changes._git takes every diff line starting with
    # "+++ b/" as a file name, including an ADDED CONTENT line "++ b/../x.md"
    # (shown as "+++ b/../x.md"), and reads workspace / that name: any *.md file
    # outside the workspace (or an absolute path) lands on the gate page and in
    # the shareable `report --html`.
    _at_gate(project)
    workspace = _git_workspace(project)
    secret = project.dir / "secret-outside.md"
    secret.write_text("# TOP-SECRET-OUTSIDE-THE-WORKSPACE\n")
    (workspace / "plan.txt").write_text("one\n++ b/../../secret-outside.md\n")
    out = project.dir / "report.html"
    done = project.cli("report", "--html", str(out))
    assert done.exit_code == 0, done.stderr
    assert "TOP-SECRET-OUTSIDE-THE-WORKSPACE" not in out.read_text("utf-8")


def test_a_change_committed_after_the_look_changes_the_hash(project: Project) -> None:
    # review finding: in a git workspace the hash covers `git diff HEAD` and the
    # untracked files only, not HEAD itself: a change COMMITTED after the
    # reviewer looked (or by the worker during the stage) is invisible to the
    # gate page and leaves the hash unchanged, so `approve --expect` passes.
    _at_gate(project)
    workspace = _git_workspace(project)
    seen = _hash(project, "g")
    (workspace / "plan.txt").write_text("rm -rf everything\n")
    _git(workspace, "commit", "-qam", "sneaky")
    refused = project.cli("approve", "g", "--expect", seen)
    assert refused.exit_code == 1, refused.output
    assert "changed since you looked" in refused.stderr


def test_a_fifo_in_the_workspace_does_not_hang_show(project: Project) -> None:
    # review finding: workspace_changes._hash_file opens every changed entry that
    # is not a symlink and reads it to EOF: a named pipe (or a .md FIFO for
    # _add_markdown) left by a worker blocks `show`, the gate page's worker
    # thread and `approve --expect` forever.
    import os

    _at_gate(project)
    os.mkfifo(project.dir / "tasks" / "g" / "pipe")
    try:
        done = project.run("show", "g", timeout=20)
    except subprocess.TimeoutExpired:
        raise AssertionError("`show` hung on a FIFO in the workspace") from None
    assert done.returncode == 0, done.stderr


def test_a_huge_sparse_file_does_not_stall_show(project: Project) -> None:
    # review finding: _hash_file reads every changed file to its end on every
    # `show`, gate page load and `approve --expect`: one 64 GiB sparse file (a
    # second to make) costs a full read each time. A size cap with a
    # (size, mtime, inode) stand-in past it would keep the page bounded.
    _at_gate(project)
    with (project.dir / "tasks" / "g" / "huge.bin").open("wb") as handle:
        handle.truncate(64 << 30)
    try:
        done = project.run("show", "g", timeout=20)
    except subprocess.TimeoutExpired:
        raise AssertionError("`show` spent over 20 s hashing one sparse file") from None
    assert done.returncode == 0, done.stderr


def test_reading_a_gate_runs_no_command_from_the_workspace_git_config(project: Project) -> None:
    # review finding: workspace_changes runs `git diff` / `git ls-files` in the
    # worker-controlled repository with its own .git/config: core.fsmonitor (or a
    # .gitattributes textconv driver) is a command git runs, so `show`, the gate
    # page and `report --html` execute whatever the worker configured, in the
    # reviewer's process. Pass `-c core.fsmonitor= --no-textconv` (and
    # GIT_CONFIG_NOSYSTEM, a safe `-c` set) or read the tree without running hooks.
    _at_gate(project)
    workspace = _git_workspace(project)
    marker = project.dir / "ran-from-git-config"
    _git(workspace, "config", "core.fsmonitor", f"touch '{marker}'; false")
    (workspace / "plan.txt").write_text("two\n")
    assert project.cli("show", "g").exit_code == 0
    assert not marker.exists()


def test_report_html_references_no_remote_image_from_a_task_body(project: Project) -> None:
    # review finding: Markdown images in a task body (or a changed .md file)
    # render as <img src="https://..."> in the "self-contained, no network"
    # report; only its <meta> CSP stops the fetch, and a viewer that ignores
    # meta CSP (mail clients, previewers) pings the URL when the file is opened.
    # Drop non-data: image sources when rendering for the report (or render
    # images as links).
    body = "See ![pixel](https://tracker.example/p.png?who=reviewer)"
    assert project.cli("add", "x", "--title", "x", "--body", body).exit_code == 0
    out = project.dir / "report.html"
    done = project.cli("report", "--html", str(out))
    assert done.exit_code == 0, done.stderr
    assert "tracker.example" not in re.sub(r"<a [^>]*>", "", out.read_text("utf-8"))


def test_a_file_deleted_after_the_look_changes_the_hash(project: Project) -> None:
    # review finding: outside git, the gate lists and hashes only the files
    # modified since the stage began; a deletion (by the worker during the
    # stage, or by anyone after the reviewer looked) is neither shown nor
    # hashed, so `approve --expect` passes on a workspace missing files.
    # Hash the full listing (names, sizes, mtimes) or a manifest taken at the
    # stage's start.
    import os

    workspace = project.dir / "tasks" / "g"
    workspace.mkdir(parents=True)
    keep = workspace / "tests.py"
    keep.write_text("def test_it(): pass\n")
    os.utime(keep, (1_000_000_000, 1_000_000_000))  # long before the stage
    _at_gate(project)
    seen = _hash(project, "g")
    keep.unlink()
    refused = project.cli("approve", "g", "--expect", seen)
    assert refused.exit_code == 1, refused.output


def test_reading_a_gate_runs_no_filter_or_textconv_driver(project: Project) -> None:
    # .gitattributes names the drivers, the repository's config gives their
    # commands: a clean filter runs on `git diff` of a modified file, a
    # textconv on its diff text.
    _at_gate(project)
    workspace = _git_workspace(project)
    ran = project.dir / "ran"
    (workspace / ".gitattributes").write_text("*.txt filter=evil diff=evil\n")
    _git(workspace, "config", "filter.evil.clean", f"touch '{ran}-clean'; cat")
    _git(workspace, "config", "filter.evil.required", "true")
    _git(workspace, "config", "diff.evil.textconv", f"touch '{ran}-textconv'; cat")
    (workspace / "plan.txt").write_text("two\n")
    shown = project.cli("show", "g")
    assert shown.exit_code == 0, shown.output
    assert not Path(f"{ran}-clean").exists()
    assert not Path(f"{ran}-textconv").exists()
    out = project.dir / "report.html"
    assert project.cli("report", "--html", str(out)).exit_code == 0
    assert "+two" in out.read_text("utf-8"), shown.output  # the diff is still shown
    assert not list(project.dir.glob("ran-*"))


def test_a_markdown_file_through_a_symlinked_folder_is_not_read(project: Project) -> None:
    _at_gate(project)
    outside = project.dir / "outside"
    outside.mkdir()
    (outside / "notes.md").write_text("# OUTSIDE-THROUGH-A-LINK\n")
    (project.dir / "tasks" / "g" / "docs").symlink_to(outside)
    (project.dir / "tasks" / "g" / "own.md").write_text("# OWN-NOTES\n")
    out = project.dir / "report.html"
    assert project.cli("report", "--html", str(out)).exit_code == 0
    text = out.read_text("utf-8")
    assert "OWN-NOTES" in text
    assert "OUTSIDE-THROUGH-A-LINK" not in text


def test_work_committed_during_the_stage_is_shown_against_the_starting_commit(
    project: Project,
) -> None:
    workspace = project.dir / "tasks" / "g"
    workspace.mkdir(parents=True)
    _git(workspace, "init", "-q")
    (workspace / "plan.txt").write_text("one\n")
    _git(workspace, "add", "plan.txt")
    old = "2001-09-09T01:46:40+00:00"  # long before the stage began
    subprocess.run(
        [*GIT_AS_T, "-C", str(workspace), "commit", "-qm", "before the stage"],
        check=True,
        capture_output=True,
        env={**os.environ, "GIT_AUTHOR_DATE": old, "GIT_COMMITTER_DATE": old},
    )
    _at_gate(project)
    (workspace / "plan.txt").write_text("one\nCOMMITTED-BY-THE-WORKER\n")
    _git(workspace, "commit", "-qam", "the stage's work")
    out = project.dir / "report.html"
    assert project.cli("report", "--html", str(out)).exit_code == 0
    text = out.read_text("utf-8")
    assert "+COMMITTED-BY-THE-WORKER" in text
    assert "-one" not in text  # the base is the old commit, not the empty tree


def test_a_worktree_set_in_the_git_config_shows_no_file_outside_the_workspace(
    project: Project,
) -> None:
    # The worker commits a path it guesses, then points core.worktree at the
    # reviewer's folder: the diff would show that folder's file.
    _at_gate(project)
    workspace = _git_workspace(project)
    elsewhere = project.dir / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "plan.txt").write_text("REVIEWERS-OWN-FILE\n")
    _git(workspace, "config", "core.worktree", str(elsewhere))
    out = project.dir / "report.html"
    assert project.cli("report", "--html", str(out)).exit_code == 0
    assert "REVIEWERS-OWN-FILE" not in out.read_text("utf-8")


def test_a_dot_git_file_pointing_elsewhere_is_not_followed(project: Project) -> None:
    # `.git` as a file names another repository's folder: its committed files
    # would show as deleted lines of the diff.
    _at_gate(project)
    other = project.dir / "reviewers-repo"
    other.mkdir()
    _git(other, "init", "-q")
    (other / "private.txt").write_text("REVIEWERS-COMMITTED-SECRET\n")
    _git(other, "add", "private.txt")
    _git(other, "commit", "-qm", "mine")
    workspace = project.dir / "tasks" / "g"
    (workspace / ".git").write_text(f"gitdir: {other / '.git'}\n")
    out = project.dir / "report.html"
    assert project.cli("report", "--html", str(out)).exit_code == 0
    assert "REVIEWERS-COMMITTED-SECRET" not in out.read_text("utf-8")
