"""Defects an outside review reproduced through the CLI, one test each.

Each test drives the real CLI (a real process where signals or crashes are
involved) and fails on the code before its fix.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from e2e.e2e_support import PASS, agent, attempts, execute, gone, stage, wait_for
from support import Project, check_invariants, copy_database, make_project

pytestmark = pytest.mark.e2e


def sh(script: str) -> list[str]:
    return ["sh", "-c", script]


# -- 1. a stage's env reaches only its own pipeline ----------------------------


def test_stage_env_does_not_leak_into_another_pipeline(project: Project) -> None:
    dump = sh('printf %s "${FAKE_SECRET-unset}" > secret.txt')
    project.write_config(
        stage("implement", worker=dump, verifier=PASS, pipeline="alpha", env={"FAKE_SECRET": "s3"})
        + stage("implement", worker=dump, verifier=PASS, pipeline="beta")
    )
    added = project.cli("add", "a", "--title", "A", "--pipeline", "alpha", "--priority", "9")
    assert added.exit_code == 0
    assert project.cli("add", "b", "--title", "B", "--pipeline", "beta").exit_code == 0
    result = project.run("tick")
    assert result.returncode == 0, result.stderr
    assert (project.dir / "tasks" / "a" / "secret.txt").read_text() == "s3"
    assert (project.dir / "tasks" / "b" / "secret.txt").read_text() == "unset"


# -- 2. setup runs under the stop, fence and lease machinery -------------------


def setup_config(project: Project, setup: list[str], **keys: object) -> None:
    text = stage("only", worker=agent("--touch", "ran"), verifier=PASS)
    project.write_config(text, **keys)
    config = project.config.read_text()
    head, _, rest = config.partition("[[pipelines.default.stages]]")
    quoted = ", ".join(json.dumps(arg) for arg in setup)
    project.config.write_text(
        f"{head}[pipelines.default]\nsetup = [{quoted}]\n\n[[pipelines.default.stages]]{rest}"
    )


def test_sigterm_stops_a_running_setup(project: Project, tmp_path: Path) -> None:
    pidfile = tmp_path / "setup.pid"
    setup_config(project, sh(f"echo $$ > {pidfile}; exec sleep 60"))
    assert project.cli("add", "t1", "--title", "Setup").exit_code == 0
    tick = project.popen("tick")
    pid = int(wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), what="setup"))
    tick.send_signal(signal.SIGTERM)
    _, err = tick.communicate(timeout=30)
    assert tick.returncode == 143, err
    assert wait_for(lambda: gone(pid), what="setup to be gone")
    assert [a["outcome"] for a in attempts(project, "t1")] == ["interrupted"]


def test_halt_stops_a_running_setup(project: Project, tmp_path: Path) -> None:
    pidfile = tmp_path / "setup.pid"
    setup_config(project, sh(f"echo $$ > {pidfile}; exec sleep 60"), lease_seconds=3)
    assert project.cli("add", "t1", "--title", "Setup").exit_code == 0
    tick = project.popen("tick")
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), what="setup")
    assert project.cli("halt", "t1", "--note", "stop it").exit_code == 0
    _, err = tick.communicate(timeout=30)
    assert tick.returncode == 0, err
    assert [a["outcome"] for a in attempts(project, "t1")] == ["interrupted"]
    assert project.state("t1") == "only:halted"


def test_a_setup_that_failed_is_not_taken_as_done(project: Project, tmp_path: Path) -> None:
    """The first setup makes the folder, then fails; the next attempt must
    set it up again, not run the worker in the half-made folder."""
    flag = tmp_path / "failed-once"
    script = (
        'mkdir "$0" && touch "$0/half"; '
        f'if [ -e {flag} ]; then touch "$0/complete"; exit 0; fi; touch {flag}; exit 3'
    )
    setup_config(project, [*sh(script), "{workspace}"])
    assert project.cli("add", "t1", "--title", "Setup").exit_code == 0
    first = project.run("tick", "--max-tasks", "1")
    assert first.returncode == 0, first.stderr
    assert [a["outcome"] for a in attempts(project, "t1")] == ["worker_error"]
    assert (project.dir / "tasks" / "t1" / "half").exists()
    second = project.run("tick", "--max-tasks", "1")
    assert second.returncode == 0, second.stderr
    workspace = project.dir / "tasks" / "t1"
    assert (workspace / "complete").exists()
    assert (workspace / "ran").exists()
    assert project.state("t1") == "complete"


def test_no_chained_claim_starts_once_a_stop_is_requested(project: Project) -> None:
    """SIGTERM arrives just as the record of t1 committed the claim of t2:
    t2's worker must not start; its claim is closed `interrupted`."""
    project.write_config(stage("only", worker=agent("--touch", "ran"), verifier=PASS))
    for slug, priority in (("t1", "2"), ("t2", "1")):
        assert project.cli("add", slug, "--title", slug, "--priority", priority).exit_code == 0
    tick = project.run("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": "after_record_commit:term"})
    assert tick.returncode == 143, tick.stderr
    assert (project.dir / "tasks" / "t1" / "ran").exists()
    assert not (project.dir / "tasks" / "t2" / "ran").exists()
    assert [a["outcome"] for a in attempts(project, "t2")] == ["interrupted"]
    assert check_invariants(project.db_url, allow_running=False) == []


# -- 3. errors the tick survives reach cron ---------------------------------------


def test_a_failed_record_is_on_stderr_and_in_the_exit_status(project: Project) -> None:
    project.write_config(stage("only", worker=["true"], verifier=PASS))
    assert project.cli("add", "t1", "--title", "T").exit_code == 0
    tick = project.run(
        "tick", "-q", extra_env={"ORCHESTRATOR_TEST_FAULT": "inside_record_tx:raise"}
    )
    assert tick.returncode == 70, (tick.stdout, tick.stderr)
    assert "Error: t1: attempt 1 at only could not be recorded" in tick.stderr
    assert "injected fault at inside_record_tx" in tick.stderr
    assert "Traceback" not in tick.stderr
    assert project.query("SELECT exit_code FROM ticks WHERE finished_at IS NOT NULL") == [(70,)]


def test_run_recovers_what_its_own_earlier_tick_left_at_once(project: Project) -> None:
    """`run` is one process: an attempt its previous tick could not record
    is recognised by tick id and recovered by the next tick, not after the
    lease (60 s here) runs out."""
    project.write_config(stage("only", worker=["true"], verifier=PASS), lease_seconds=600)
    assert project.cli("add", "t1", "--title", "T").exit_code == 0
    proc = project.popen(
        "run", "--interval", "0.2", extra_env={"ORCHESTRATOR_TEST_FAULT": "inside_record_tx:raise"}
    )
    try:
        wait_for(
            lambda: project.query(
                "SELECT count(*) FROM attempts WHERE outcome = 'crashed' "
                "AND error LIKE 'crashed: left by an earlier tick of this process%'"
            )[0][0],
            timeout=30,
            what="the leftover to be recovered",
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert "could not be recorded" in err


# -- 4. reads never take SQLite's write lock ----------------------------------


@pytest.fixture
def sqlite_project(tmp_path: Path, template_db: Path) -> Project:
    """A project on SQLite only: its write lock is what these tests are about."""
    url = copy_database(template_db, tmp_path / "orchestrator.db")
    return make_project(tmp_path / "proj", url)


def test_reads_work_while_another_process_holds_the_write_lock(sqlite_project: Project) -> None:
    project = sqlite_project
    project.write_config(stage("only", worker=["true"], verifier=PASS), busy_timeout=0.5)
    assert project.cli("add", "t1", "--title", "T").exit_code == 0
    writer = sqlite3.connect(project.db_url.removeprefix("sqlite:///"), isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        for command in (("doctor",), ("list",), ("show", "t1"), ("history",), ("scores", "t1")):
            result = project.run(*command)
            assert result.returncode == 0, (command, result.stdout, result.stderr)
            assert "locked" not in result.stdout + result.stderr, command
    finally:
        writer.rollback()
        writer.close()


def test_doctor_leaves_the_write_lock_free(sqlite_project: Project) -> None:
    """A reader's transaction (doctor's quick_check runs in one) must let a
    writer in at once: the write lock is taken only by write transactions."""
    project = sqlite_project
    from sqlalchemy import text

    from orchestrator.storage.db import make_engine, read_tx
    from orchestrator.storage.schema import current_revision

    engine = make_engine(project.db_url)
    try:
        with engine.connect() as conn:
            current_revision(conn)  # a Prepared statement autobegins: a read
            conn.execute(text("PRAGMA quick_check")).all()
            other = sqlite3.connect(project.db_url.removeprefix("sqlite:///"), timeout=0)
            other.isolation_level = None
            other.execute("BEGIN IMMEDIATE")  # would raise "database is locked"
            other.rollback()
            other.close()
        with read_tx(engine) as conn:
            conn.execute(text("SELECT 1"))
    finally:
        engine.dispose()


# -- 5. the dry run names the task the tick would claim ------------------------


def test_dry_run_follows_the_claims_order(project: Project) -> None:
    project.write_config(stage("only", worker=["true"], verifier=PASS))
    assert project.cli("add", "low", "--title", "Low").exit_code == 0
    assert project.cli("add", "high", "--title", "High", "--priority", "9").exit_code == 0
    dry = project.cli("tick", "--dry-run", "--max-tasks", "1")
    assert dry.exit_code == 0, dry.output
    assert "high: would run only attempt 1" in dry.output
    assert "low:" not in dry.output
    real = project.run("tick", "--max-tasks", "1")
    assert real.returncode == 0, real.stderr
    assert project.state("high") == "complete"
    assert project.state("low") == "only"


# -- 6. sql refuses drivers it cannot hold read-only ---------------------------


@pytest.mark.pg
def test_sql_refuses_a_driver_it_cannot_make_read_only(tmp_path: Path, migrated_pg: str) -> None:
    pytest.importorskip("psycopg2", reason="the psycopg2 driver ('.[test]' installs it)")
    project = make_project(tmp_path / "p", migrated_pg)
    assert project.cli("add", "t1", "--title", "Kept").exit_code == 0
    project.db_url = migrated_pg.replace("postgresql+psycopg://", "postgresql+psycopg2://", 1)
    result = project.run("sql", "COMMIT; DELETE FROM tasks")
    assert result.returncode == 78, result.stderr
    assert "sql refuses the postgresql+psycopg2 driver" in result.stderr
    project.db_url = migrated_pg
    assert project.query("SELECT count(*) FROM tasks") == [(1,)]


# -- 7. an attempt whose lease ran out stops itself --------------------------------


def test_an_attempt_that_cannot_renew_its_lease_stops(project: Project, tmp_path: Path) -> None:
    pidfile = tmp_path / "worker.pid"
    project.write_config(
        stage("only", worker=agent("--pidfile", str(pidfile), "--sleep", "60"), verifier=PASS),
        lease_seconds=3,
    )
    assert project.cli("add", "t1", "--title", "T").exit_code == 0
    tick = project.popen("tick", "--max-tasks", "1")
    wait_for(pidfile.exists, what="the worker")
    # As if the tick had been frozen past its lease: another host may now
    # recover the attempt, so the owner must not renew and run on.
    execute(project, "UPDATE attempts SET lease_expires_at = '2000-01-01 00:00:00'")
    _, err = tick.communicate(timeout=30)
    assert tick.returncode == 0, err
    assert [a["outcome"] for a in attempts(project, "t1")] == ["interrupted"]


# -- 8. pids are judged only within one pid namespace ----------------------------


def test_a_tick_in_another_pid_namespace_is_not_taken_for_dead(
    project: Project, tmp_path: Path
) -> None:
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        pytest.skip("needs root and unshare(1) to make a pid namespace")
    wait_file = tmp_path / "release"
    pidfile = tmp_path / "worker.pid"
    project.write_config(
        stage(
            "only",
            worker=agent("--pidfile", str(pidfile), "--wait-file", str(wait_file)),
            verifier=PASS,
        )
    )
    assert project.cli("add", "t1", "--title", "T").exit_code == 0
    env = project.process_env({"ORCHESTRATOR_HOST": "shared"})
    inside = subprocess.Popen(
        [unshare, "--pid", "--fork", "--mount-proc", sys.executable, "-m", "orchestrator", "tick"],
        cwd=project.dir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(pidfile.exists, what="the worker in the other namespace")
        other = project.dir / "other.toml"
        other.write_text(project.config.read_text().replace("orchestrator.lock", "other.lock"))
        outside = project.run(
            "--config",
            str(other),
            "tick",
            "--max-seconds",
            "0",
            extra_env={"ORCHESTRATOR_HOST": "shared"},
        )
        assert outside.returncode == 0, outside.stderr
        assert [a["outcome"] for a in attempts(project, "t1")] == [None]
    finally:
        wait_file.touch()
        _, err = inside.communicate(timeout=60)
    assert inside.returncode == 0, err
    assert [a["outcome"] for a in attempts(project, "t1")] == ["passed"]


# -- 9. orphans without a note are still found and killed -----------------------


def test_recovery_kills_an_orphan_the_dead_tick_never_noted(
    project: Project, tmp_path: Path
) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("finding processes by environment needs /proc")
    pidfile, grandchild = tmp_path / "worker.pid", tmp_path / "grandchild.pid"
    project.write_config(
        stage(
            "only",
            worker=agent(
                "--pidfile", str(pidfile), "--grandchild", str(grandchild), "--sleep", "60"
            ),
            verifier=PASS,
        ),
        kill_grace_seconds=1,
    )
    assert project.cli("add", "t1", "--title", "T").exit_code == 0
    died = project.run("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": "after_spawn:exit"})
    assert died.returncode == 137, died.stderr
    worker = int(wait_for(lambda: pidfile.exists() and pidfile.read_text().split()[0]))
    child = int(wait_for(lambda: grandchild.exists() and grandchild.read_text().strip()))
    assert not list((project.dir / "state").rglob("*.proc"))  # no note was written
    recovery = project.run("tick", "--max-seconds", "0")  # recover, claim nothing
    assert recovery.returncode == 0, recovery.stderr
    assert wait_for(lambda: gone(worker) and gone(child), what="the orphans to be killed")
    # Its tick died before it saw the worker run 10 ms: not charged (issue 22).
    assert [a["outcome"] for a in attempts(project, "t1")] == ["host_error"]


# -- 10. a halted task's attempt is interrupted, whatever it said ------------------


def test_an_attempt_of_a_halted_task_is_interrupted(project: Project, tmp_path: Path) -> None:
    release, pidfile = tmp_path / "release", tmp_path / "worker.pid"
    project.write_config(
        stage(
            "only",
            worker=agent("--pidfile", str(pidfile), "--wait-file", str(release)),
            verifier=agent("--pass", "--score", "0.9"),
        )
    )
    assert project.cli("add", "t1", "--title", "T").exit_code == 0
    tick = project.popen("tick")
    wait_for(pidfile.exists, what="the worker")
    assert project.cli("halt", "t1", "--note", "enough").exit_code == 0
    release.touch()  # the worker ends before the tick's next fence check
    _, err = tick.communicate(timeout=30)
    assert tick.returncode == 0, err
    rows = project.query("SELECT outcome, score, pass, late_result FROM attempts")
    assert len(rows) == 1
    outcome, score, passed, late = rows[0]
    assert (outcome, score, passed) == ("interrupted", None, None)
    assert '"outcome": "passed"' in late and '"score": 0.9' in late
    assert project.query("SELECT count(*) FROM score_history") == [(0,)]
    assert project.state("t1") == "only:halted"


# -- 11. what a rolled-back transaction did is never said ------------------------


def test_a_rolled_back_halt_is_not_reported(project: Project) -> None:
    project.write_config(stage("only", worker=["true"], verifier=PASS))
    assert project.cli("add", "t1", "--title", "T", "--priority", "2").exit_code == 0
    assert project.cli("add", "t2", "--title", "T").exit_code == 0
    execute(project, "UPDATE tasks SET stage = 'gone' WHERE slug = 't2'")
    tick = project.run("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": "after_halt_unknown:raise"})
    assert "halted" not in tick.stdout
    assert "claiming the next task" in tick.stderr
    assert tick.returncode != 0
    assert project.state("t2") == "gone"
    assert project.state("t1") == "complete"


# -- found by the review of the fixes above ----------------------------------------


def test_a_setup_that_leaves_a_file_fails_the_task_not_the_host(project: Project) -> None:
    """What setup left at the workspace's path is the task's fault: the
    attempt is a worker_error that counts, and other tasks still run."""
    script = 'if [ "$1" = t1 ]; then touch "$0"; else mkdir "$0"; fi'
    setup_config(project, [*sh(script), "{workspace}", "{task}"])
    assert project.cli("add", "t1", "--title", "File", "--priority", "2").exit_code == 0
    assert project.cli("add", "t2", "--title", "Fine").exit_code == 0
    tick = project.run("tick", "--max-tasks", "1")
    assert tick.returncode == 0, tick.stderr
    [first] = attempts(project, "t1")
    assert first["outcome"] == "worker_error"
    assert "not a folder" in first["error"]
    other = project.run("tick", "--task", "t2")  # the host goes on with other tasks
    assert other.returncode == 0, other.stderr
    assert project.state("t2") == "complete"
    again = project.run("tick", "--task", "t1", "--max-tasks", "1")  # removed, set up again
    assert again.returncode == 0, again.stderr
    assert [a["outcome"] for a in attempts(project, "t1")] == ["worker_error", "worker_error"]


def test_a_setup_that_makes_a_link_never_runs_the_worker_through_it(
    project: Project, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    setup_config(project, ["ln", "-s", str(outside), "{workspace}"])
    assert project.cli("add", "t1", "--title", "Link").exit_code == 0
    tick = project.run("tick", "--max-tasks", "1")
    assert tick.returncode == 0, tick.stderr
    assert not (outside / "ran").exists()
    [first] = attempts(project, "t1")
    assert first["outcome"] == "worker_error" and "a link" in first["error"]


def test_the_readme_git_worktree_setup_survives_a_stopped_setup(
    project: Project, tmp_path: Path
) -> None:
    """A setup stopped half-way leaves a registered worktree and a branch;
    the worktree recipe of docs/how-to/worktrees.md must set the task up on
    the next try."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    repo = tmp_path / "repo"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "0"], check=True)
    pidfile = tmp_path / "setup.pid"
    stop_once = tmp_path / "stop-once"
    recipe = (
        f'git -C {repo} worktree prune && git -C {repo} worktree add -q -B "task/$0" "$1" '
        f"&& if [ ! -e {stop_once} ]; then touch {stop_once}; echo $$ > {pidfile}; sleep 60; fi"
    )
    setup_config(project, [*sh(recipe), "{task}", "{workspace}"])
    assert project.cli("add", "t1", "--title", "Git").exit_code == 0
    tick = project.popen("tick")
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), what="setup")
    tick.send_signal(signal.SIGTERM)
    _, err = tick.communicate(timeout=30)
    assert tick.returncode == 143, err
    again = project.run("tick")
    assert again.returncode == 0, again.stderr
    assert [a["outcome"] for a in attempts(project, "t1")] == ["interrupted", "passed"]
    assert (project.dir / "tasks" / "t1" / "ran").exists()


def test_a_closed_stdout_loses_no_committed_claim(project: Project) -> None:
    project.write_config(stage("only", worker=["true"], verifier=PASS))
    assert project.cli("add", "t1", "--title", "T", "--priority", "5").exit_code == 0
    assert project.cli("add", "t2", "--title", "T").exit_code == 0
    execute(project, "UPDATE tasks SET pipeline = 'gone' WHERE slug = 't1'")
    proc = project.popen("tick")
    assert proc.stdout is not None
    proc.stdout.close()  # every line the tick prints now fails
    _, err = proc.communicate(timeout=60)
    assert "reporting failed" in err
    assert proc.returncode != 0, err
    assert project.state("t1") == "only:halted"
    assert project.state("t2") == "complete"
    assert check_invariants(project.db_url, allow_running=False) == []


def test_a_reader_does_not_hold_the_tick_at_its_checkpoint(sqlite_project: Project) -> None:
    """A reader inside a transaction (a BI tool, a long `sql`) keeps the WAL
    from being truncated; the tick's checkpoint must not wait for it (the
    busy timeout here is far longer than the bound the test allows)."""
    project = sqlite_project
    project.write_config(stage("only", worker=["true"], verifier=PASS), busy_timeout=120)
    assert project.cli("add", "t1", "--title", "T").exit_code == 0
    reader = sqlite3.connect(project.db_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM tasks").fetchone()
        tick = project.run("tick", timeout=60)
        assert tick.returncode == 0, tick.stderr
    finally:
        reader.rollback()
        reader.close()
    assert project.state("t1") == "complete"


def test_dry_run_counts_attempts_not_halts(project: Project) -> None:
    project.write_config(stage("only", worker=["true"], verifier=PASS))
    assert project.cli("add", "t1", "--title", "T", "--priority", "5").exit_code == 0
    assert project.cli("add", "t2", "--title", "T").exit_code == 0
    execute(project, "UPDATE tasks SET pipeline = 'gone' WHERE slug = 't1'")
    dry = project.cli("tick", "--dry-run", "--max-tasks", "1")
    assert "t1: would halt" in dry.output
    assert "t2: would run only attempt 1" in dry.output
    real = project.run("tick", "--max-tasks", "1")
    assert real.returncode == 0, real.stderr
    assert project.state("t2") == "complete"


def test_a_task_that_holds_the_database_busy_is_interrupted_not_excused(
    sqlite_project: Project, tmp_path: Path
) -> None:
    """A worker that holds SQLite's write lock past the lease keeps its own
    lease from being renewed: that is the task's doing, not a lost database,
    so the attempt is `interrupted` (it counts toward max_interrupts) and
    never `database_error` (which counts toward nothing, for ever)."""
    project = sqlite_project
    db = project.db_url.removeprefix("sqlite:///")
    hog = [
        sys.executable,
        "-c",
        "import sqlite3, sys, time\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('BEGIN IMMEDIATE')\n"
        "time.sleep(30)\n",
        db,
    ]
    project.write_config(
        stage("only", worker=hog, verifier=PASS),
        lease_seconds=3,
        busy_timeout=0.5,
        kill_grace_seconds=1,
    )
    assert project.cli("add", "t1", "--title", "Hog").exit_code == 0
    tick = project.run("tick", "--max-tasks", "1", timeout=60)
    assert [a["outcome"] for a in attempts(project, "t1")] == ["interrupted"], tick.stderr
