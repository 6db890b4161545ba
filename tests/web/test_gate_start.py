"""The gate diffs against the commit the stage started from (issue 22, item 1).

Each worker here is a real shell script run by a real tick, doing what a
worker hiding its work would: back-dating its commit, or listing the file
it wrote in `.git/info/exclude`, `core.excludesFile` or a `.gitignore` of
its own. The reviewer's page (`report --html`) must still show the work,
and the approval hash (`show`) must still cover it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from support import Project, check_invariants

GIT_AS_T = ("git", "-c", "user.name=t", "-c", "user.email=t@example.invalid")
OLD = "2001-09-09T01:46:40+00:00"  # long before any stage


def _git(workspace: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [*GIT_AS_T, "-C", str(workspace), *args],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return done.stdout.strip()


def _repository(project: Project, slug: str = "g") -> tuple[Path, str]:
    """A workspace made before the task, one commit in it; (path, its sha)."""
    workspace = project.dir / "tasks" / slug
    workspace.mkdir(parents=True)
    _git(workspace, "init", "-q")
    (workspace / "plan.txt").write_text("one\n")
    _git(workspace, "add", "plan.txt")
    _git(workspace, "commit", "-qm", "before the stage")
    return workspace, _git(workspace, "rev-parse", "HEAD")


def _stage_with_worker(project: Project, script: str, verifier: str = "") -> None:
    path = project.dir / "worker.sh"
    path.write_text("set -e\n" + script)
    verify = verifier or 'echo \'{"pass": true, "score": 0.9}\''
    project.write_config(
        f"""
        [[pipelines.default.stages]]
        name = "research"
        gate = true
        worker = ["sh", {json.dumps(str(path))}]
        verifier = ["sh", "-c", {json.dumps(verify)}]
        """
    )


def _to_gate(project: Project, slug: str = "g") -> None:
    assert project.cli("add", slug, "--title", "Gate me").exit_code == 0
    for _ in range(3):
        done = project.run("tick")
        assert done.returncode == 0, done.stderr
        if project.state(slug) == "research:awaiting_approval":
            return
    raise AssertionError(project.state(slug))


def _page(project: Project) -> str:
    out = project.dir / "report.html"
    done = project.cli("report", "--html", str(out))
    assert done.exit_code == 0, done.output
    return out.read_text("utf-8")


def _hash(project: Project, slug: str = "g") -> str:
    shown = project.cli("show", slug)
    assert shown.exit_code == 0, shown.output
    found = re.search(r"approval\s+([0-9a-f]{16})", shown.stdout)
    assert found, shown.stdout
    return found.group(1)


COMMIT_BACKDATED = f"""
echo CHANGED-BY-THE-WORKER >> plan.txt
GIT_AUTHOR_DATE={OLD} GIT_COMMITTER_DATE={OLD} \\
    git -c user.name=w -c user.email=w@example.invalid commit -qam "looks old"
"""


def test_a_back_dated_commit_of_the_worker_is_diffed_against_the_stage_start(
    project: Project,
) -> None:
    workspace, start = _repository(project)
    _stage_with_worker(project, COMMIT_BACKDATED)
    _to_gate(project)
    [(recorded,)] = project.query("SELECT start_commit FROM attempts")
    assert recorded == start  # HEAD when the worker started, not what it made
    assert check_invariants(project.db_url) == []
    assert _git(workspace, "rev-parse", "HEAD") != start
    page = _page(project)
    assert "+CHANGED-BY-THE-WORKER" in page
    assert f"against {start[:12]}" in page


def test_every_attempt_of_the_run_diffs_against_the_first_ones_start(
    project: Project,
) -> None:
    # The first attempt commits and fails; the second starts from that commit
    # and passes: the first one's work is still the stage's.
    _repository(project)
    failing_once = (
        'if [ -e "$ORCHESTRATOR_WORKSPACE/.once" ]; then '
        'echo \'{"pass": true, "score": 0.9}\'; else '
        'touch "$ORCHESTRATOR_WORKSPACE/.once"; '
        'echo \'{"pass": false, "score": 0.1}\'; fi'
    )
    script = "if [ ! -e .once ]; then\n" + COMMIT_BACKDATED + "fi\n"
    _stage_with_worker(project, script, verifier=failing_once)
    _to_gate(project)
    starts = [row[0] for row in project.query("SELECT start_commit FROM attempts ORDER BY id")]
    assert len(starts) == 2 and starts[0] != starts[1]
    assert "+CHANGED-BY-THE-WORKER" in _page(project)


def test_a_file_the_worker_lists_in_info_exclude_is_shown_and_hashed(project: Project) -> None:
    workspace, _ = _repository(project)
    _stage_with_worker(
        project,
        "echo 'import os  # HIDDEN-CONFTEST' > conftest.py\n"
        "echo conftest.py >> .git/info/exclude\n",
    )
    _to_gate(project)
    assert "conftest.py" in _page(project)
    seen = _hash(project)
    (workspace / "conftest.py").write_text("import os  # edited after the look\n")
    assert _hash(project) != seen


def test_a_file_the_worker_hides_through_core_excludes_file_is_shown(project: Project) -> None:
    _repository(project)
    _stage_with_worker(
        project,
        "echo 'print(1)' > sitecustomize.py\n"
        'echo sitecustomize.py > "$ORCHESTRATOR_WORKSPACE/.git/hidden"\n'
        'git config core.excludesFile "$ORCHESTRATOR_WORKSPACE/.git/hidden"\n',
    )
    _to_gate(project)
    assert "sitecustomize.py" in _page(project)


def test_a_gitignore_the_worker_adds_ignores_nothing(project: Project) -> None:
    # The new .gitignore ignores itself too: it must not hide itself either.
    _repository(project)
    _stage_with_worker(
        project,
        "mkdir -p deep\necho 'x = 1' > deep/conftest.py\nprintf '*\\n' > deep/.gitignore\n",
    )
    _to_gate(project)
    page = _page(project)
    assert "deep/conftest.py" in page
    assert "deep/.gitignore" in page


def test_a_file_a_committed_gitignore_already_ignored_is_left_out(project: Project) -> None:
    # What the project ignored before the stage (build output) stays out of
    # the page; info/exclude does not count, the committed .gitignore does.
    workspace, _ = _repository(project)
    (workspace / ".gitignore").write_text("build/\n")
    _git(workspace, "add", ".gitignore")
    _git(workspace, "commit", "-qm", "ignore the build")
    _stage_with_worker(
        project,
        "mkdir -p build && echo BUILD-OUTPUT > build/out.o\n"
        "echo 'x = 1' > notes.py\n"
        "echo notes.py >> .git/info/exclude\n",
    )
    _to_gate(project)
    page = _page(project)
    assert "notes.py" in page
    assert "build/out.o" not in page


def test_an_edited_committed_gitignore_no_longer_leaves_anything_out(project: Project) -> None:
    workspace, _ = _repository(project)
    (workspace / ".gitignore").write_text("build/\n")
    _git(workspace, "add", ".gitignore")
    _git(workspace, "commit", "-qm", "ignore the build")
    _stage_with_worker(
        project,
        "echo 'x = 1' > conftest.py\n"
        "echo conftest.py >> .gitignore\n"
        "mkdir -p build && echo BUILD-OUTPUT > build/out.o\n",
    )
    _to_gate(project)
    page = _page(project)
    assert "conftest.py" in page
    assert "build/out.o" in page


def test_history_rewritten_past_the_start_lists_every_file(project: Project) -> None:
    # The worker replaces the repository: its starting commit is gone, so
    # nothing is taken as "before the stage".
    _repository(project)
    _stage_with_worker(
        project,
        "rm -rf .git && git init -q\n"
        "echo REWRITTEN > plan.txt && git add plan.txt\n"
        f"GIT_AUTHOR_DATE={OLD} GIT_COMMITTER_DATE={OLD} "
        "git -c user.name=w -c user.email=w@example.invalid commit -qm old\n",
    )
    _to_gate(project)
    page = _page(project)
    assert "is gone" in page
    assert "plan.txt" in page


def test_an_attempt_from_before_the_record_falls_back_to_commit_dates(
    project: Project,
) -> None:
    # Rows written before `start_commit` existed hold NULL: the base is then
    # the newest commit older than the stage, as it was.
    workspace, start = _repository(project)
    env = {**os.environ, "GIT_AUTHOR_DATE": OLD, "GIT_COMMITTER_DATE": OLD}
    _git(workspace, "commit", "--amend", "-qm", "before the stage", env=env)
    start = _git(workspace, "rev-parse", "HEAD")
    _stage_with_worker(project, "echo LATER-WORK >> plan.txt\n")
    _to_gate(project)
    engine_sql = "UPDATE attempts SET start_commit = NULL"
    from sqlalchemy import create_engine, text

    engine = create_engine(project.db_url)
    try:
        with engine.begin() as conn:
            conn.execute(text(engine_sql))
    finally:
        engine.dispose()
    page = _page(project)
    assert "+LATER-WORK" in page
    assert f"{start[:12]} (the newest commit older than the stage)" in page


def test_an_edit_the_worker_marks_unchanged_in_the_index_is_shown_and_hashed(
    project: Project,
) -> None:
    # The index is the worker's too: an assume-unchanged or skip-worktree
    # entry makes git take the file as its indexed content, so the edit
    # would be in neither the diff nor the hash.
    workspace, _ = _repository(project)
    (workspace / "notes.txt").write_text("two\n")
    _git(workspace, "add", "notes.txt")
    _git(workspace, "commit", "-qm", "notes")
    _stage_with_worker(
        project,
        "git update-index --assume-unchanged plan.txt\n"
        "git update-index --skip-worktree notes.txt\n"
        "echo HIDDEN-IN-PLAN >> plan.txt\n"
        "echo HIDDEN-IN-NOTES >> notes.txt\n",
    )
    _to_gate(project)
    page = _page(project)
    assert "+HIDDEN-IN-PLAN" in page
    assert "+HIDDEN-IN-NOTES" in page
    seen = _hash(project)
    (workspace / "plan.txt").write_text("one\nedited after the look\n")
    assert _hash(project) != seen


def test_an_edit_a_tiny_big_file_threshold_would_make_binary_is_shown(project: Project) -> None:
    # The worker's core.bigFileThreshold: a file above it is "Binary files
    # differ" to git diff, so a threshold of one byte hides every change.
    _repository(project)
    _stage_with_worker(
        project,
        "git config core.bigFileThreshold 1\necho HIDDEN-AS-BINARY >> plan.txt\n",
    )
    _to_gate(project)
    assert "+HIDDEN-AS-BINARY" in _page(project)


def test_an_edit_the_worker_marks_binary_in_info_attributes_is_shown(project: Project) -> None:
    # `.git/info/attributes` is never shown: `-diff` there turns the change
    # into "Binary files differ" (the hash still covers the content). A
    # file that is binary stays so.
    workspace, _ = _repository(project)
    (workspace / "image.bin").write_bytes(b"\0\1\2")
    _git(workspace, "add", "image.bin")
    _git(workspace, "commit", "-qm", "an image")
    _stage_with_worker(
        project,
        "echo '* -diff' > .git/info/attributes\necho HIDDEN-AS-BINARY >> plan.txt\n"
        "printf 'BIN\\000ARY' > image.bin\n",
    )
    _to_gate(project)
    page = _page(project)
    assert "+HIDDEN-AS-BINARY" in page
    assert "Binary files a/image.bin and b/image.bin differ" in page
    assert "+BIN" not in page  # not diffed as text


def test_a_file_named_like_a_tracked_one_but_for_case_is_shown(project: Project) -> None:
    # core.ignoreCase in the worker's config makes git take `makefile` for
    # the tracked `Makefile`: not untracked, not changed. Make reads
    # `makefile` first.
    workspace, _ = _repository(project)
    (workspace / "Makefile").write_text("all:\n\ttrue\n")
    _git(workspace, "add", "Makefile")
    _git(workspace, "commit", "-qm", "a Makefile")
    _stage_with_worker(
        project,
        "git config core.ignoreCase true\nprintf 'all:\\n\\tcurl evil\\n' > makefile\n",
    )
    _to_gate(project)
    assert "makefile" in _page(project)
    seen = _hash(project)
    (workspace / "makefile").write_text("all:\n\tcurl worse\n")
    assert _hash(project) != seen
