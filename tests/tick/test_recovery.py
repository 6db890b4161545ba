"""Recovery alone, on a real database: the attempt of a tick that died is
closed `crashed` (its task retried), a result the dead tick kept is
recorded as that tick would have, and a live tick's attempt is left alone."""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Callable

from e2e.e2e_support import PASS, stage
from sqlalchemy import create_engine, text
from support import Project, check_invariants
from tick.tick_support import Bench

from orchestrator.domain.decide import Outcome
from orchestrator.domain.verdict import Verdict
from orchestrator.ext.model import LEASE_EXPIRED, AttemptRun
from orchestrator.tick.host import HostIdentity
from orchestrator.tick.kept import keep_result
from orchestrator.tick.lookups import attempt_folder
from orchestrator.tick.recovery import Recovery
from orchestrator.tick.started import mark_started

ONE_STAGE = stage("only", worker=["true"], verifier=PASS, max_attempts=3)


def _recovery(b: Bench) -> Recovery:
    return Recovery(b.settings, b.tx, b.tick, b.me, b.recorder(), b.applier())


def _dead_holder() -> HostIdentity:
    """This host, as a tick whose process has exited (and been reaped)."""
    me = HostIdentity.here()
    gone = subprocess.Popen(["true"])
    gone.wait()
    return dataclasses.replace(me, pid=gone.pid, start_token="gone")


def _started(b: Bench, slug: str, number: int = 1) -> None:
    """As a command of the attempt leaves it once it ran (`tick.started`)."""
    folder = attempt_folder(b.settings, slug, "only", number)
    folder.mkdir(parents=True, exist_ok=True)
    mark_started(folder)


def test_a_dead_holders_attempt_is_closed_crashed_and_retried(
    bench: Callable[..., Bench], project: Project
) -> None:
    holder = bench(ONE_STAGE, me=_dead_holder())
    holder.add("t1")
    holder.claim()
    _started(holder, "t1")
    b = bench()
    recovery = _recovery(b)
    recovery.recover()
    [(outcome, error)] = project.query("SELECT outcome, error FROM attempts")
    assert outcome == "crashed"
    assert error == "crashed: tick process is gone"
    assert project.state("t1") == "only"  # ready for its next attempt
    assert b.tick.report.recovered == 1
    assert b.said == ["t1: attempt 1 at only crashed (tick process is gone)"]
    assert check_invariants(project.db_url, allow_running=False) == []
    recovery.recover()  # nothing left: nothing written twice
    assert b.tick.report.recovered == 1


def test_an_attempt_that_never_started_is_the_hosts_fault(
    bench: Callable[..., Bench], project: Project
) -> None:
    holder = bench(ONE_STAGE, me=_dead_holder())
    holder.add("t1")
    holder.claim()  # its tick died before any command of it ran
    b = bench()
    _recovery(b).recover()
    [(outcome, error)] = project.query("SELECT outcome, error FROM attempts")
    assert outcome == "host_error"  # counts toward nothing
    assert error == "host_error: tick process is gone; none of its commands had started"
    assert project.state("t1") == "only"
    assert check_invariants(project.db_url, allow_running=False) == []


def test_a_live_ticks_attempt_is_left_alone(bench: Callable[..., Bench], project: Project) -> None:
    b = bench(ONE_STAGE)
    b.add("t1")
    b.claim()  # this process, this tick: alive
    _started(b, "t1")
    _recovery(b).recover()
    assert project.query("SELECT outcome FROM attempts") == [(None,)]
    assert project.state("t1") == "only:running"
    # The same process in a later tick (`run` ticks many times) left it over.
    later = bench()
    _recovery(later).recover()
    [(error,)] = project.query("SELECT error FROM attempts")
    assert error == "crashed: left by an earlier tick of this process"


def test_an_expired_lease_on_another_host_is_an_orphan(
    bench: Callable[..., Bench], project: Project
) -> None:
    elsewhere = dataclasses.replace(HostIdentity.here(), host="elsewhere")
    holder = bench(ONE_STAGE, me=elsewhere)
    holder.add("t1")
    holder.claim()
    b = bench()
    _recovery(b).recover()
    assert project.query("SELECT outcome FROM attempts") == [(None,)]  # its lease holds
    engine = create_engine(project.db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE attempts SET lease_expires_at = '2000-01-01 00:00:00'"))
    engine.dispose()
    _recovery(b).recover()
    [(error,)] = project.query("SELECT error FROM attempts")
    assert error == f"crashed: {LEASE_EXPIRED}"


def test_a_result_the_dead_tick_kept_is_recorded(
    bench: Callable[..., Bench], project: Project
) -> None:
    holder = bench(ONE_STAGE, me=_dead_holder())
    holder.add("t1")
    claim = holder.claim()
    folder = attempt_folder(holder.settings, "t1", "only", 1)
    folder.mkdir(parents=True)
    verdict = Verdict(passed=True, score=1.0, reasons=(), next_hint="")
    keep_result(folder, claim, AttemptRun(Outcome.PASSED, verdict=verdict), database=True)
    b = bench()
    _recovery(b).recover()
    assert project.query("SELECT outcome FROM attempts") == [("passed",)]
    assert project.state("t1") == "complete"
    assert b.tick.report.recovered == 1
    assert not (folder / "result.json").exists()  # recorded: nothing kept any more
    assert check_invariants(project.db_url, allow_running=False) == []
