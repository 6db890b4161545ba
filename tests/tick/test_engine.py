"""The engine's promises under faults: named crash points, a stale owner's late
result, claiming limits, and how a signal ends a tick."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from e2e.e2e_support import (
    PASS,
    agent,
    execute,
    kill_quietly,
    outcomes,
    read_pid,
    reap,
    stage,
    wait_for,
)
from support import Project, check_invariants

from orchestrator.cli.app import App
from orchestrator.cli.ticking import _run_one_tick
from orchestrator.errors import Interrupted
from orchestrator.tick.claims import Claimer
from orchestrator.tick.tick_run import TickRun

BEFORE_COMMIT = [
    "after_claim_commit",
    "after_spawn_recorded",
    "after_worker",
    "before_record",
    "inside_record_tx",
]


@pytest.mark.e2e
@pytest.mark.parametrize("point", [*BEFORE_COMMIT, "after_record_commit"])
def test_crash_point_then_a_clean_tick(project: Project, point: str) -> None:
    """A crash before the verdict's commit leaves the attempt to
    recovery (closed `crashed`, run again); after it, nothing is written twice."""
    project.write_config(stage("only", worker=["true"], verifier=PASS), retry_interval=60)
    assert project.cli("add", "t1", "--title", "Crashes").exit_code == 0
    crashed = project.run("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": f"{point}:exit"})
    assert crashed.returncode == 137, crashed.stderr

    clean = project.run("tick")
    assert clean.returncode == 0, clean.stderr
    assert project.state("t1") == "complete"
    events = [row[0] for row in project.query("SELECT event FROM transitions ORDER BY seq")]
    if point in BEFORE_COMMIT:
        # Dead before its worker ran: nothing of the task ran, nothing charged.
        first = "host_error" if point == "after_claim_commit" else "crashed"
        assert outcomes(project, "t1") == [first, "passed"]
        assert events == ["add", "claim", "retry", "claim", "stage_passed"]
    else:
        assert outcomes(project, "t1") == ["passed"]
        assert events == ["add", "claim", "stage_passed"]
    assert check_invariants(project.db_url, allow_running=False) == []


@pytest.mark.e2e
def test_a_stale_owner_result_is_kept_but_changes_nothing(project: Project, tmp_path: Path) -> None:
    """A stale owner, without a frozen process: tick A's attempt is recovered by
    tick B (another lock: another host) while A still runs it, as if A had
    missed its lease renewals. A's late verdict is kept as `late_result`; it
    writes no transition and does not undo B's work."""
    pidfile = tmp_path / "worker.pid"
    project.write_config(
        stage("only", worker=agent("--pidfile", str(pidfile), "--sleep", "3,0"), verifier=PASS),
        lease_seconds=30,  # A renews every 5 s: not before its worker ends at 3 s
        retry_interval=60,
    )
    other = project.dir / "other-host.toml"
    other.write_text(project.config.read_text().replace("orchestrator.lock", "other.lock"))
    assert project.cli("add", "t1", "--title", "Stale owner").exit_code == 0
    owner = project.popen("tick")
    try:
        wait_for(lambda: read_pid(pidfile), what="the owner's worker")
        # A's lease has run out as far as anyone can tell, on a host B cannot reach.
        changed = execute(
            project,
            "UPDATE attempts SET host = 'elsewhere', lease_expires_at = :past",
            past=datetime(2000, 1, 1, tzinfo=UTC),
        )
        assert changed == 1
        rescuer = project.cli("--config", str(other), "tick")
        assert rescuer.exit_code == 0, rescuer.output
        assert outcomes(project, "t1") == ["crashed", "passed"]
        assert project.state("t1") == "complete"
        done = reap(owner, timeout=30)
        assert done.rc == 0, done.stderr
    finally:
        kill_quietly([owner.pid, read_pid(pidfile)])
    assert outcomes(project, "t1") == ["crashed", "passed"]
    [(late,)] = project.query("SELECT late_result FROM attempts WHERE number = 1")
    assert json.loads(late)["outcome"] == "passed"
    events = [r[0] for r in project.query("SELECT event FROM transitions ORDER BY seq")]
    assert events == ["add", "claim", "retry", "claim", "stage_passed"]
    assert check_invariants(project.db_url, allow_running=False) == []


def test_max_seconds_stops_claiming_but_not_running(project: Project, tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    project.write_config(
        stage("only", worker=agent("--dump", str(dump), "--sleep", "0.6"), verifier=PASS),
        retry_interval=60,
    )
    for slug in ("t1", "t2", "t3"):
        assert project.cli("add", slug, "--title", slug).exit_code == 0
    result = project.cli("tick", "--max-seconds", "0.3")
    assert result.exit_code == 0, result.output
    # the first claim comes at once; the next would come after 0.6 s, past the limit
    assert [project.state(s) for s in ("t1", "t2", "t3")] == ["complete", "only", "only"]
    assert outcomes(project, "t1") == ["passed"]  # the running attempt was not cut short
    assert check_invariants(project.db_url, allow_running=False) == []


@pytest.mark.parametrize(("interval", "attempts"), [(60, 1), (0, 2)])
def test_a_task_ready_again_waits_out_the_retry_interval(
    project: Project, interval: int, attempts: int
) -> None:
    """Within one tick a task gets its next attempt only once `retry_interval`
    has passed since its last one ended: a failure retried, or a pass moved to
    the next stage. Tasks that are done do not count against it."""
    fail = agent("--fail", "--score", "0.1")
    project.write_config(
        stage("first", worker=["true"], verifier=PASS)
        + stage("second", worker=["true"], verifier=PASS),
        retry_interval=interval,
    )
    config = project.config.read_text()
    project.config.write_text(
        config
        + '\n[[pipelines.flaky.stages]]\nname = "only"\n'
        + f'worker = ["true"]\nverifier = {json.dumps(fail)}\nmax_attempts = 2\n'
    )
    assert project.cli("add", "moves", "--title", "m").exit_code == 0
    assert project.cli("add", "fails", "--title", "f", "--pipeline", "flaky").exit_code == 0
    result = project.cli("tick")
    assert result.exit_code == 0, result.output
    assert len(outcomes(project, "moves")) == attempts
    assert len(outcomes(project, "fails")) == attempts
    assert project.state("moves") == ("second" if attempts == 1 else "complete")
    assert check_invariants(project.db_url, allow_running=False) == []


@pytest.mark.parametrize("edit", [True, False])
def test_an_edited_config_stops_claiming_and_a_touch_does_not(project: Project, edit: bool) -> None:
    config = str(project.config)
    worker = ["sh", "-c", 'echo "# edited" >> "$0"', config] if edit else ["touch", config]
    project.write_config(stage("only", worker=worker, verifier=PASS), retry_interval=60)
    for slug in ("t1", "t2"):
        assert project.cli("add", slug, "--title", slug).exit_code == 0
    result = project.cli("tick")
    assert result.exit_code == 0, result.output
    states = [project.state(slug) for slug in ("t1", "t2")]
    if edit:
        assert states == ["complete", "only"]
        assert "stopped claiming: the configuration changed" in result.output
    else:
        assert states == ["complete", "complete"]
        assert "stopped claiming" not in result.output


def _fail_once(monkeypatch: pytest.MonkeyPatch, owner: type, name: str, call: int) -> None:
    """Make <owner>.<name> raise on its `call`-th call (1-based), once."""
    real = getattr(owner, name)
    calls = 0

    def flaky(self: object, *args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        if calls == call:
            raise RuntimeError(f"injected failure in {name}")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(owner, name, flaky)


@pytest.mark.parametrize(
    ("owner", "name", "call"), [(Claimer, "claim_in", 2), (TickRun, "count", 1)]
)
def test_a_failure_around_the_chained_claim_loses_neither_record_nor_claim(
    project: Project, monkeypatch: pytest.MonkeyPatch, owner: type, name: str, call: int
) -> None:
    """With --jobs 1 the record of t1 and the claim of t2 share a transaction.
    A claim that fails there is undone alone (a savepoint) and made again by
    the loop; a failure after the commit (reporting) still runs t2."""
    project.write_config(stage("only", worker=["true"], verifier=PASS), retry_interval=60)
    for slug in ("t1", "t2"):
        assert project.cli("add", slug, "--title", slug).exit_code == 0
    _fail_once(monkeypatch, owner, name, call)
    project.cli("tick")
    assert [project.state(s) for s in ("t1", "t2")] == ["complete", "complete"]
    assert outcomes(project, "t1") == ["passed"]
    assert outcomes(project, "t2") == ["passed"]
    assert check_invariants(project.db_url, allow_running=False) == []


def _one_tick(project: Project, *, clean: bool, received: list[int]) -> None:
    app = App(config=str(project.config), db=project.db_url, verbose=False)
    settings = app.settings(require_config=True)
    stop = threading.Event()
    stop.set()
    _run_one_tick(app, settings, stop, received, {"jobs": 1}, quiet=True, stop_is_clean=clean)


def test_a_signal_that_stopped_no_attempt_ends_run_cleanly(project: Project) -> None:
    """`run` exits 0 on SIGTERM while idle, even when the signal lands inside a
    tick that had nothing running; `tick` still reports the signal."""
    assert project.cli("add", "t1", "--title", "Not claimed").exit_code == 0
    _one_tick(project, clean=True, received=[15])  # returns: run's loop then ends, exit 0
    with pytest.raises(Interrupted) as caught:
        _one_tick(project, clean=False, received=[15])
    assert caught.value.exit_code == 143
    assert project.state("t1") == "research"
    assert outcomes(project, "t1") == []  # a stopping tick claims nothing
    assert check_invariants(project.db_url, allow_running=False) == []
