"""`metrics` parsed by prometheus_client's own parser; `prune` frees only
old finished tasks' folders and never a row."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from support import DEFAULT_STAGES, Project


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_metrics_parse_and_count_what_the_database_holds(project: Project, tmp_path: Path) -> None:
    failing = '\n[[hooks]]\nname = "down"\non = ["awaiting_approval"]\ncommand = ["false"]\n'
    project.write_config(DEFAULT_STAGES + failing)
    for slug in ("t1", "t2"):
        assert project.cli("add", slug, "--title", slug).exit_code == 0
    assert project.cli("add", "t3", "--title", "later").exit_code == 0
    assert project.cli("tick", "--max-tasks", "2").exit_code == 75  # `down` failed

    result = project.cli("metrics")
    assert result.exit_code == 0, result.output
    got = samples(result.output)
    assert (
        got[("orchestrator_tasks", (("stage", "research"), ("status", "awaiting_approval")))] == 2
    )
    assert got[("orchestrator_tasks", (("stage", "research"), ("status", "ready")))] == 1
    assert got[("orchestrator_attempts_total", (("outcome", "passed"),))] == 2
    assert got[("orchestrator_attempts_running", ())] == 0
    assert got[("orchestrator_approvals_pending", ())] == 2
    assert got[("orchestrator_approval_oldest_age_seconds", ())] >= 0
    assert got[("orchestrator_recoveries_total", ())] == 0
    assert got[("orchestrator_tick_duration_seconds", ())] >= 0
    # The one tick failed its deliveries (75): no success to report yet.
    assert ("orchestrator_tick_last_success_timestamp_seconds", ()) not in got
    assert got[("orchestrator_hook_deliveries_failing", (("hook", "down"),))] == 2

    target = tmp_path / "metrics" / "orchestrator.prom"
    target.parent.mkdir()
    written = project.cli("metrics", "--textfile", str(target))
    assert written.exit_code == 0 and written.output == ""
    assert samples(target.read_text())[("orchestrator_approvals_pending", ())] == 2
    assert [p.name for p in target.parent.iterdir()] == ["orchestrator.prom"]  # no temp left


def test_prune_removes_only_old_finished_folders_and_no_row(project: Project) -> None:
    only = DEFAULT_STAGES.replace("gate = true", "gate = false")
    project.write_config(only)
    for slug in ("old", "recent"):
        assert project.cli("add", slug, "--title", slug).exit_code == 0
    assert project.cli("tick").exit_code == 0
    # Halted (it may be resumed): its output stays, however old.
    assert project.cli("add", "stuck", "--title", "stuck").exit_code == 0
    assert project.cli("halt", "stuck", "--note", "n").exit_code == 0
    state = project.dir / "state"
    (state / "stuck" / "research-001").mkdir(parents=True)
    assert _folders(state) == {"old", "recent", "stuck"}
    _age(project, "old", days=40)
    _age(project, "stuck", days=40)
    rows_before = _rows(project)

    dry = project.cli("prune", "--older-than", "30", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "would remove" in dry.output and "old" in dry.output and "would free" in dry.output
    assert (state / "old").is_dir()

    done = project.cli("prune", "--older-than", "30")
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert lines[0].startswith("removed ") and lines[0].split()[1].endswith("old")
    assert lines[-1].startswith("freed ") and "in 1 folder" in lines[-1]
    assert _folders(state) == {"recent", "stuck"}
    assert (state / ".idle-tick").is_file()  # the idle tick's marker is no task's folder
    assert _rows(project) == rows_before
    again = project.cli("prune", "--older-than", "30")
    assert again.output.strip() == "freed 0 B in 0 folders"
    shown = json.loads(project.cli("show", "old", "--json").output)
    assert shown["state"] == "complete"


def _folders(state: Path) -> set[str]:
    """The tasks' folders (the pipeline versions a host keeps are not one)."""
    return {p.name for p in state.iterdir() if p.is_dir() and p.name != ".pipeline-versions"}


def _age(project: Project, slug: str, *, days: int) -> None:
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import create_engine, update

    from orchestrator.storage import tables

    engine = create_engine(project.db_url)
    with engine.begin() as conn:
        conn.execute(
            update(tables.tasks)
            .where(tables.tasks.c.slug == slug)
            .values(updated_at=datetime.now(UTC) - timedelta(days=days))
        )
    engine.dispose()


def _rows(project: Project) -> list[tuple[object, ...]]:
    return [
        project.query(f"SELECT count(*) FROM {table}")[0]
        for table in ("tasks", "attempts", "transitions", "events")
    ]


ONE_STAGE = """
[[pipelines.default.stages]]
name = "build"
worker = ["sh", "-c", "echo deliverable > result.txt"]
verifier = ["sh", "-c", "echo '{\\"pass\\": true, \\"score\\": 1.0}'"]
"""


def test_prune_never_removes_a_workspace_even_when_state_root_is_the_workspace_root(
    project: Project,
) -> None:
    # review finding: prune removes `state_root/<slug>` whole, and the config
    # accepts a state_root equal to (or holding) workspace_root: with
    # `state_root = workspace_root = "tasks"` a finished task's work product is
    # deleted by `prune`. Either the config should refuse overlapping roots or
    # prune should remove only the attempt folders it wrote.
    project.write_config(ONE_STAGE, workspace_root="tasks", state_root="tasks")
    assert project.cli("add", "t1", "--title", "t1").exit_code == 0
    done = project.cli("tick")
    assert project.state("t1") == "complete", done.output
    deliverable = project.dir / "tasks" / "t1" / "result.txt"
    assert deliverable.read_text() == "deliverable\n"
    pruned = project.cli("prune", "--older-than", "0")
    assert deliverable.exists(), pruned.output


def test_metrics_textfile_in_a_missing_folder_is_an_error_message_not_a_traceback(
    project: Project, tmp_path: Path
) -> None:
    # review finding: `metrics --textfile` lets prometheus_client's OSError out
    # as a Python traceback (exit 1) when the folder is missing or read-only.
    done = project.run("metrics", "--textfile", str(tmp_path / "missing" / "o.prom"))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr


def test_prune_keeps_a_workspace_inside_state_root_and_files_it_did_not_write(
    project: Project,
) -> None:
    # state_root holds workspace_root: the task's folder under state_root is
    # not the workspace, but a slug naming the workspace root's folder is.
    project.write_config(ONE_STAGE, workspace_root="data/work", state_root="data")
    for slug in ("t1", "work"):
        assert project.cli("add", slug, "--title", slug).exit_code == 0
    assert project.cli("tick").exit_code == 0
    assert project.state("t1") == project.state("work") == "complete"
    data = project.dir / "data"
    notes = data / "t1" / "notes.txt"  # a file the tick did not write
    notes.write_text("mine\n")
    pruned = project.cli("prune", "--older-than", "0")
    assert pruned.exit_code == 0, pruned.output
    assert f"kept {data / 'work'}" in pruned.output
    assert (data / "work" / "work" / "result.txt").read_text() == "deliverable\n"
    assert (data / "work" / "t1" / "result.txt").read_text() == "deliverable\n"
    assert not (data / "t1" / "build-001").exists()  # the attempt folder went
    assert notes.read_text() == "mine\n"  # and with it only that
    assert pruned.output.splitlines()[-1].endswith("in 1 folder")


def test_metrics_textfile_errors_name_the_file_with_a_documented_status(
    project: Project, tmp_path: Path
) -> None:
    missing = project.run("metrics", "--textfile", str(tmp_path / "missing" / "o.prom"))
    assert missing.returncode == 74, missing.stderr
    assert missing.stderr.strip() == (
        f"Error: cannot write {tmp_path / 'missing' / 'o.prom'}: "
        f"folder {tmp_path / 'missing'} does not exist"
    )
    blocker = tmp_path / "file"
    blocker.write_text("")
    not_folder = project.run("metrics", "--textfile", str(blocker / "o.prom"))
    assert not_folder.returncode == 74, not_folder.stderr
    assert not_folder.stderr.strip() == f"Error: cannot write {blocker / 'o.prom'}: Not a directory"
    assert "Traceback" not in not_folder.stderr
