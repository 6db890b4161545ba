"""`orchestrator explain SLUG [--json]` (issue 15) for a plateau-halted,
an awaiting, a backing-off and a running task, through the real CLI; times
are set with SQL instead of waited for."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from e2e.e2e_support import PASS, stage, wait_for
from support import Project

STUCK = ["sh", "-c", 'echo \'{"pass": false, "score": 0.5, "next_hint": "try harder"}\'']


def explain(project: Project, slug: str = "t1") -> tuple[str, dict[str, Any]]:
    text = project.run("explain", slug)
    assert text.returncode == 0, text.stderr
    data = project.run("explain", slug, "--json")
    assert data.returncode == 0, data.stderr
    return text.stdout, json.loads(data.stdout)


def execute(project: Project, sql: str, **params: Any) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(project.db_url)
    try:
        with engine.begin() as conn:
            conn.execute(text(sql), params)
    finally:
        engine.dispose()


def test_explain_a_plateau_halted_task(project: Project) -> None:
    project.write_config(
        stage("work", worker=["true"], verifier=STUCK, max_attempts=10, plateau={"patience": 2})
    )
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    assert project.run("tick").returncode == 0
    text, data = explain(project)

    assert data["state"] == "work:halted" and data["halt_reason"] == "score_plateau"
    assert data["halt"]["resume"] == "orchestrator resume t1"
    assert data["halt"]["resume_note"] is None
    assert data["halt"]["rule"].startswith("the plateau rule")
    assert data["attempts"] == {"used": 3, "max": 10, "left": 7}
    plateau = data["plateau"]
    assert plateau["scores"] == [0.5, 0.5, 0.5] and plateau["window"] == [0.5, 0.5]
    assert plateau["best_before"] == 0.5 and plateau["best_within"] == 0.5
    assert plateau["threshold"] == 0.51 and plateau["plateau"] is True
    assert plateau["scores_until_rule_applies"] == 0
    assert data["last_attempt"]["attempt"] == 3
    assert data["last_attempt"]["next_hint"] == "try harder"
    assert data["next_tick"].startswith("nothing: the task is halted")
    assert data["running"] is None and data["backoff"] is None
    assert data["cost"]["spent_usd"] == 0.0 and data["cost"]["budget_usd"] is None

    assert text.splitlines()[0] == "t1: work:halted"
    assert "halted    score_plateau: the plateau rule" in text
    assert "resume    orchestrator resume t1" in text
    assert "attempts  3 of 10 used, 7 left" in text
    assert "best before the window 0.50, window [0.50, 0.50], threshold 0.51" in text
    assert "hint: try harder" in text


def test_explain_an_awaiting_gate(project: Project) -> None:
    project.write_config(stage("review", verifier=PASS, gate=True) + stage("ship", verifier=PASS))
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    assert project.run("tick").returncode == 0
    assert project.state("t1") == "review:awaiting_approval"
    two_hours_ago = datetime.now(UTC) - timedelta(hours=2)
    execute(
        project,
        "UPDATE transitions SET at = :at WHERE seq = (SELECT max(seq) FROM transitions)",
        at=two_hours_ago.replace(tzinfo=None) if "sqlite" in project.db_url else two_hours_ago,
    )
    text, data = explain(project)
    assert data["gate"]["waited_seconds"] >= 7200
    assert data["next_tick"] == (
        "nothing until a person runs `orchestrator approve t1` "
        "or `orchestrator reject t1 --note ...`"
    )
    assert data["last_attempt"]["outcome"] == "passed"
    assert "gate      waiting since" in text and "next tick nothing until a person" in text


def test_explain_a_task_backing_off(project: Project) -> None:
    project.write_config(
        stage(
            "work",
            worker=["sh", "-c", "exit 75"],
            verifier=PASS,
            retry_exit_codes=[75],
            backoff={"initial": 5.0, "tries": 4},
        )
    )
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    assert project.run("tick").returncode == 0
    in_an_hour = datetime.now(UTC) + timedelta(hours=1)
    execute(
        project,
        "UPDATE tasks SET backoff_until = :until",
        until=in_an_hour.replace(tzinfo=None) if "sqlite" in project.db_url else in_an_hour,
    )
    text, data = explain(project)
    assert data["status"] == "ready"
    backoff = data["backoff"]
    # the hour the test set, read back; its time left is that hour less the time passed
    until = datetime.fromisoformat(backoff["until"])
    assert (until if until.tzinfo else until.replace(tzinfo=UTC)) == in_an_hour
    assert 0 < backoff["seconds_left"] <= 3600
    assert backoff["waits"] == 1 and backoff["tries"] == 4
    assert data["next_tick"].startswith("waits: the worker asked to be retried later; attempt 2")
    assert data["attempts"]["used"] == 0  # the wait spent no attempt
    assert "exit 75 is a retry exit code" in data["last_attempt"]["error"]
    assert "backoff   until" in text and "wait 1 of 4" in text


def test_explain_a_running_task(project: Project) -> None:
    worker = [
        "sh",
        "-c",
        "touch started; n=0; "
        "while [ ! -e release ] && [ $n -lt 6000 ]; do sleep 0.05; n=$((n+1)); done",
    ]
    # An hour's lease: however slow the machine, it has not run out when read.
    project.write_config(stage("work", worker=worker, verifier=PASS), lease_seconds=3600)
    project.env["ORCHESTRATOR_HOST"] = "runner-1"
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    tick = project.popen("tick")
    workspace = project.dir / "tasks" / "t1"
    try:
        wait_for((workspace / "started").exists, what="the worker to start")
        text, data = explain(project)
        running = data["running"]
        assert running["attempt"] == 1 and running["host"] == "runner-1"
        assert 0 < running["lease_seconds_left"] <= 3600
        assert data["next_tick"].startswith("leaves it: attempt 1 runs on runner-1")
        assert "running   attempt 1 on runner-1" in text
    finally:
        (workspace / "release").touch()
        tick.communicate(timeout=60)
    assert tick.returncode == 0
    _, done = explain(project)
    assert done["running"] is None and done["next_tick"] == "nothing: the task is finished"


def test_explain_a_task_out_of_attempts_names_the_rule_once(project: Project) -> None:
    project.write_config(stage("work", worker=["true"], verifier=STUCK, max_attempts=1))
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    assert project.run("tick").returncode == 0
    text, data = explain(project)
    assert data["halt"]["reason"] == "max_attempts"
    assert "halted    max_attempts: the run used every attempt the stage allows\n" in text
    assert text.count("max_attempts:") == 1


def test_explain_an_unknown_task(project: Project) -> None:
    result = project.run("explain", "nope")
    assert result.returncode != 0 and "nope" in result.stderr


# review finding: attempts.pid is written only when the attempt is recorded,
# so `explain` of a running attempt always says "(pid None)" (JSON: null),
# though the process note in its state folder has the pid from the start.
def test_explain_a_running_task_names_its_pid(project: Project) -> None:
    worker = [
        "sh",
        "-c",
        "touch started; n=0; "
        "while [ ! -e release ] && [ $n -lt 6000 ]; do sleep 0.05; n=$((n+1)); done",
    ]
    project.write_config(stage("work", worker=worker, verifier=PASS))
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    tick = project.popen("tick")
    workspace = project.dir / "tasks" / "t1"
    try:
        wait_for((workspace / "started").exists, what="the worker to start")
        text, data = explain(project)
        assert isinstance(data["running"]["pid"], int)
        assert "pid None" not in text
    finally:
        (workspace / "release").touch()
        tick.communicate(timeout=60)
