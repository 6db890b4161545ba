"""A task's life through the CLI, with real worker and verifier processes.

Ticks run in-process (click's CliRunner) unless the test is about the
process itself; workers and verifiers are always real processes (the fake
agent in tests/fakes/agent.py). Every test ends with the invariant check.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_support import PASS, agent, attempts, halt_reason, outcomes, records, stage
from support import Project, check_invariants, cli_json

pytestmark = pytest.mark.e2e


def tick(project: Project, *args: str) -> str:
    result = project.cli("tick", *args)
    assert result.exit_code == 0, (result.exit_code, result.output, result.stderr)
    return result.stdout


def ok(project: Project, *args: str) -> str:
    result = project.cli(*args)
    assert result.exit_code == 0, (args, result.exit_code, result.output, result.stderr)
    return result.stdout


def test_gate_hint_reject_approve_complete(project: Project, tmp_path: Path) -> None:
    seq = tmp_path / "verdicts"
    seq.write_text(
        '{"pass": false, "score": 0.3, "next_hint": "add tests"}\n'
        '{"pass": true, "score": 0.8}\n'
        '{"pass": true, "score": 0.9}\n'
    )
    dump = tmp_path / "worker.jsonl"
    worker = agent("--dump", str(dump), "--arg={hint}")
    project.write_config(
        stage("research", worker=worker, verifier=agent("--sequence", str(seq)), gate=True)
        + stage("implement", worker=worker, verifier=PASS),
        retry_interval=60,
    )
    ok(project, "add", "t1", "--title", "A task")

    tick(project)  # attempt 1 fails with a hint
    assert project.state("t1") == "research"
    tick(project)  # attempt 2 gets the hint, passes, waits at the gate
    assert project.state("t1") == "research:awaiting_approval"

    before = project.counts()
    tick(project)  # nothing to do: only the tick's time is noted, in an idle row
    idle = project.counts()
    assert idle == {**before, "ticks": before["ticks"] + 1}
    tick(project)
    assert project.counts() == idle  # the idle row moves forward

    ok(project, "reject", "t1", "--note", "cite your sources", "--by", "bob")
    assert project.state("t1") == "research"
    tick(project)  # attempt 3 gets the note, passes again
    assert project.state("t1") == "research:awaiting_approval"
    ok(project, "approve", "t1", "--by", "alice")
    assert project.state("t1") == "research:approved"
    tick(project)  # moves on to implement and runs it in the same tick
    assert project.state("t1") == "complete"

    starts = records(dump, "start")
    env = [r["env"] for r in starts]
    assert [e["ORCHESTRATOR_STAGE"] for e in env] == ["research"] * 3 + ["implement"]
    assert [e["ORCHESTRATOR_ATTEMPT"] for e in env] == ["1", "2", "3", "1"]
    assert [e["ORCHESTRATOR_NEXT_HINT"] for e in env] == [
        "",
        "add tests",
        "cite your sources",
        "",
    ]
    assert [r["argv"][-1] for r in starts] == [
        "--arg=",
        "--arg=add tests",
        "--arg=cite your sources",
        "--arg=",
    ]
    assert [e["ORCHESTRATOR_PREV_OUTCOME"] for e in env] == ["", "failed", "passed", ""]
    assert [e["ORCHESTRATOR_PREV_SCORE"] for e in env] == ["", "0.3", "0.8", ""]

    assert [(a["stage"], a["outcome"], a["score"]) for a in attempts(project, "t1")] == [
        ("research", "failed", 0.3),
        ("research", "passed", 0.8),
        ("research", "passed", 0.9),
        ("implement", "passed", 1.0),
    ]
    shown = cli_json(project.cli("show", "t1", "--json"))
    actors = {t["to_state"]: t["actor"] for t in shown["transitions"]}
    assert actors["research:approved"] == "alice"
    notes = [t["note"] for t in shown["transitions"] if t["actor"] == "bob"]
    assert notes == ["cite your sources"]
    assert check_invariants(project.db_url, allow_running=False) == []


def test_constant_score_plateaus_at_p_plus_one_and_resume_starts_afresh(
    project: Project,
) -> None:
    project.write_config(
        stage("research", worker=["true"], verifier=agent("--score", "0.5"), max_attempts=50)
    )
    ok(project, "add", "t1", "--title", "Stuck")
    tick(project)  # retry_interval 0: the tick keeps the task going until it halts
    assert project.state("t1") == "research:halted"
    assert halt_reason(project, "t1") == "score_plateau"
    assert outcomes(project, "t1") == ["failed"] * 4  # default patience 3 -> 4 attempts

    ok(project, "resume", "t1")
    tick(project)
    assert project.state("t1") == "research:halted"
    assert halt_reason(project, "t1") == "score_plateau"
    assert outcomes(project, "t1") == ["failed"] * 8  # a fresh window: 4 more
    assert [a["number"] for a in attempts(project, "t1")] == list(range(1, 9))
    rows = cli_json(project.cli("scores", "t1", "--json"))
    assert [r["score"] for r in rows] == [0.5] * 8
    assert check_invariants(project.db_url, allow_running=False) == []


def test_max_attempts_and_plateau_precedence(project: Project, tmp_path: Path) -> None:
    rising = tmp_path / "rising"
    rising.write_text("0.1\n0.3\n0.6\n0.9\n")
    project.write_config(
        stage("rise", worker=["true"], verifier=agent("--sequence", str(rising)), max_attempts=3)
        + stage(
            "flat",
            pipeline="both",
            worker=["true"],
            verifier=agent("--score", "0.2"),
            max_attempts=2,
            plateau={"patience": 1},
        )
    )
    ok(project, "add", "climbing", "--title", "Rises but runs out")
    ok(project, "add", "flat", "--title", "Both limits at once", "--pipeline", "both")
    tick(project)
    assert project.state("climbing") == "rise:halted"
    assert halt_reason(project, "climbing") == "max_attempts"
    assert [a["score"] for a in attempts(project, "climbing")] == [0.1, 0.3, 0.6]
    # patience 1 and max_attempts 2 both apply at attempt 2: plateau wins
    assert project.state("flat") == "flat:halted"
    assert halt_reason(project, "flat") == "score_plateau"
    assert outcomes(project, "flat") == ["failed", "failed"]
    assert check_invariants(project.db_url, allow_running=False) == []


def test_outcomes_and_one_failure_does_not_stop_the_others(
    project: Project, tmp_path: Path
) -> None:
    marker = tmp_path / "verifier-ran"
    project.write_config(
        stage("s", pipeline="garbled", worker=["true"], verifier=agent("--verdict", "no json"))
        + stage(
            "s",
            pipeline="failing",
            worker=agent("--exit", "3"),
            verifier=agent("--touch", str(marker), "--pass"),
        )
        + stage(
            "s",
            pipeline="missing",
            # Relative: the workspace's to hold, so the task's failure (a
            # program the config names by PATH or absolute path holds the
            # task instead: tests/tick/test_command_runner.py).
            worker=["./no-such-agent"],
            verifier=agent("--touch", str(marker), "--pass"),
        )
        + stage("s", pipeline="solo", worker=agent("--pass", "--score", "0.75"))
        + stage("s", pipeline="default", worker=["true"], verifier=PASS)
        + "[defaults]\nmax_attempts = 1\n",
        retry_interval=60,
    )
    for name in ("garbled", "failing", "missing", "solo", "default"):
        ok(project, "add", name, "--title", name, "--pipeline", name)
    out = tick(project)
    assert "1 invalid_verdict" in out and "2 worker_error" in out

    garbled = attempts(project, "garbled")
    assert [a["outcome"] for a in garbled] == ["invalid_verdict"]
    assert garbled[0]["score"] is None
    assert "no JSON verdict" in garbled[0]["error"]
    assert project.state("garbled") == "s:halted"

    failing = attempts(project, "failing")
    assert [a["outcome"] for a in failing] == ["worker_error"]
    assert "exited 3" in failing[0]["error"]
    missing = attempts(project, "missing")
    assert [a["outcome"] for a in missing] == ["worker_error"]
    assert "could not start" in missing[0]["error"]
    assert not marker.exists()  # the verifier never ran after a worker error

    solo = attempts(project, "solo")  # no verifier: the worker's output is the verdict
    assert [(a["outcome"], a["score"]) for a in solo] == [("passed", 0.75)]
    assert project.state("solo") == "complete"
    assert project.state("default") == "complete"
    assert check_invariants(project.db_url, allow_running=False) == []


def test_child_environment_and_literal_braces(project: Project, tmp_path: Path) -> None:
    """A real tick process: the children see their ORCHESTRATOR_* names, the
    stage's env and the inherited environment, minus the database URL, the
    config path and env_deny; a JSON argument keeps its braces."""
    dump = tmp_path / "dump.jsonl"
    verdict = (
        '{"pass": true, "score": 0.7, "reasons": ["{task} at {stage}", "{not_a_placeholder}"],'
        ' "next_hint": "{}"}'
    )
    project.write_config(
        stage(
            "research",
            worker=agent("--dump", str(dump), "--arg={task}/{stage}/{attempt}/{workspace}"),
            verifier=agent("--dump", str(dump), "--verdict", verdict),
            env={"FAKE_STAGE_ENV": "from-stage"},
        ),
        env_deny=["FAKE_SECRET"],
    )
    ok(project, "add", "t1", "--title", "Env")
    done = project.run(
        "tick", extra_env={"FAKE_SECRET": "do-not-leak", "FAKE_ALLOWED": "inherited"}
    )
    assert done.returncode == 0, done.stderr
    assert project.state("t1") == "complete"

    workspace = project.dir / "tasks" / "t1"
    starts = records(dump, "start")
    assert len(starts) == 2
    for record in starts:
        env = record["env"]
        assert "ORCHESTRATOR_DB_URL" not in env
        assert "ORCHESTRATOR_CONFIG" not in env
        assert "FAKE_SECRET" not in env
        assert env["FAKE_ALLOWED"] == "inherited"
        assert env["FAKE_STAGE_ENV"] == "from-stage"
        assert env["ORCHESTRATOR_TASK"] == "t1"
        assert env["ORCHESTRATOR_STAGE"] == "research"
        assert env["ORCHESTRATOR_ATTEMPT"] == "1"
        assert env["ORCHESTRATOR_WORKSPACE"] == str(workspace)
        assert Path(record["cwd"]) == workspace
    assert starts[0]["argv"][-1] == f"--arg=t1/research/1/{workspace}"
    assert json.loads(starts[1]["argv"][-1])["reasons"] == [
        "{task} at {stage}".replace("{task}", "t1").replace("{stage}", "research"),
        "{not_a_placeholder}",
    ]
    shown = cli_json(project.cli("show", "t1", "--json"))
    [attempt] = shown["attempts"]
    assert attempt["reasons"] == ["t1 at research", "{not_a_placeholder}"]
    assert attempt["next_hint"] == "{}"
    assert attempt["score"] == 0.7
    assert check_invariants(project.db_url, allow_running=False) == []


def test_a_lost_stage_holds_only_that_task(project: Project) -> None:
    """A pipeline that takes edits to its tasks in flight (`on_change =
    "upgrade"`) loses the stage a task waits in: that task is held (not
    run on stages it never had, not halted) and the tick names the command
    that moves it; the other tasks run."""
    upgrade = '[pipelines.default]\non_change = "upgrade"\n\n'
    project.write_config(upgrade + stage("old", worker=["true"], verifier=PASS))
    ok(project, "add", "orphan", "--title", "Its stage will vanish")
    project.write_config(
        upgrade
        + stage("new", worker=["true"], verifier=PASS)
        + stage("later", worker=["true"], verifier=PASS)
    )
    ok(project, "add", "fine", "--title", "Runs")
    done = project.run("tick", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "orphan: waits (stage 'old' has no place" in done.stderr
    assert "orchestrator migrate orphan --to current --map old=STAGE" in done.stderr
    assert project.state("orphan") == "old"  # ready, held
    assert halt_reason(project, "orphan") is None
    assert outcomes(project, "orphan") == []
    assert project.state("fine") == "complete"
    assert check_invariants(project.db_url, allow_running=False) == []


def test_idle_ticks_share_one_row_and_a_busy_one_records_itself(project: Project) -> None:
    project.write_config(stage("only", worker=["true"], verifier=PASS))
    assert project.cli("tick").exit_code == 0  # empty database: an idle tick
    assert project.cli("tick").exit_code == 0
    [idle] = project.query("SELECT id, claimed, recovered, advanced, exit_code FROM ticks")
    assert idle[1:] == (0, 0, 0, 0)  # one row for the run of idle ticks
    ok(project, "add", "t1", "--title", "One")
    ok(project, "add", "t2", "--title", "Two")
    before = project.counts()
    out = tick(project)
    assert "tick: 2 attempts" in out
    after = project.counts()
    assert after["ticks"] == before["ticks"] + 1
    [(claimed, recovered, advanced, exit_code, finished)] = project.query(
        "SELECT claimed, recovered, advanced, exit_code, finished_at FROM ticks WHERE id > :i",
        i=idle[0],
    )
    assert (claimed, recovered, advanced, exit_code) == (2, 0, 0, 0)
    assert finished is not None
    assert tick(project) == ""  # nothing left: silent, one new idle row after the work
    assert tick(project) == ""  # ... which the next idle tick moves forward
    assert project.counts() == {**after, "ticks": after["ticks"] + 1}
    [(first, last)] = project.query("SELECT min(finished_at), max(finished_at) FROM ticks")
    assert first < last
    assert check_invariants(project.db_url, allow_running=False) == []


def test_dry_run_prints_and_writes_nothing(project: Project) -> None:
    stages = stage("gate", worker=["true"], verifier=PASS, gate=True) + stage(
        "build", worker=["true"], verifier=PASS
    )
    project.write_config(stages + stage("gone", pipeline="temporary", worker=["true"]))
    ok(project, "add", "approved", "--title", "Approved")
    tick(project)
    ok(project, "approve", "approved")
    ok(project, "add", "ready", "--title", "Ready")
    ok(project, "add", "lost", "--title", "Its pipeline will vanish", "--pipeline", "temporary")
    project.write_config(stages)
    snapshot = project.query("SELECT slug, stage, status, version FROM tasks ORDER BY id")
    before = project.counts()
    out = tick(project, "--dry-run")
    assert "approved: would move gate:approved" in out
    assert "ready: would run gate attempt 1" in out
    assert "lost: would halt (unknown_stage 'gone')" in out
    assert project.counts() == before
    assert project.query("SELECT slug, stage, status, version FROM tasks ORDER BY id") == snapshot
    assert check_invariants(project.db_url, allow_running=False) == []


def test_task_and_max_tasks_limit_claims(project: Project) -> None:
    project.write_config(stage("only", worker=["true"], verifier=PASS), retry_interval=60)
    for slug in ("t1", "t2", "t3"):
        ok(project, "add", slug, "--title", slug)
    tick(project, "--task", "t2")
    assert [project.state(s) for s in ("t1", "t2", "t3")] == ["only", "complete", "only"]
    tick(project, "--max-tasks", "1")
    assert [project.state(s) for s in ("t1", "t2", "t3")] == ["complete", "complete", "only"]
    assert project.counts()["attempts"] == 2
    tick(project)
    assert project.state("t3") == "complete"
    # Claims made together with the last record count against the limit too.
    for slug in ("t4", "t5", "t6"):
        ok(project, "add", slug, "--title", slug)
    tick(project, "--max-tasks", "2")
    assert [project.state(s) for s in ("t4", "t5", "t6")] == ["complete", "complete", "only"]
    assert project.counts()["attempts"] == 5
    assert check_invariants(project.db_url, allow_running=False) == []
