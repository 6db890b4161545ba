"""The landing step alone, on a real database: what it records for each
answer a mode gives, the `pr` mode absent, and the repository's lock (held
by a live tick elsewhere, expired, or held by a dead process here). The
modes here are stand-ins that answer at once, so the step is tested apart
from git; `land_merge` itself is tested on real repositories in
tests/features/landing/test_merge.py and through real ticks in tests/e2e."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from e2e.e2e_support import PASS, stage
from sqlalchemy import create_engine, text
from support import Project, check_invariants, make_repo
from tick.tick_support import Bench

from orchestrator.features.landing.model import Landed, LandOutcome, LandRequest, Refused, SendBack

STAGES = stage("implement", worker=["true"], verifier=PASS) + stage(
    "review", worker=["true"], verifier=PASS, gate=True
)


def landing_bench(bench: Callable[..., Bench], project: Project, mode: str = "merge") -> Bench:
    """t1 at `review:landing`: its gate approved, and advanced by the claimer."""
    make_repo(project.dir)
    head = f'[pipelines.default]\nrepository = "repo"\nland = "{mode}"\n\n'
    b = bench(head + STAGES)
    b.add("t1")
    for _ in range(2):
        assert project.cli("tick").exit_code == 0
    assert project.cli("approve", "t1").exit_code == 0
    b.claimer().advance_approved()
    assert project.state("t1") == "review:landing"
    return b


def answering(
    outcome: LandOutcome, calls: list[LandRequest]
) -> Callable[[LandRequest], LandOutcome]:
    def mode(request: LandRequest) -> LandOutcome:
        calls.append(request)
        return outcome

    return mode


def test_landed_completes_the_task_with_its_commit_and_an_event(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = landing_bench(bench, project)
    calls: list[LandRequest] = []
    b.lander({"merge": answering(Landed(commit="ab" * 20), calls)}).land_all()
    assert project.state("t1") == "complete"
    assert [c.branch for c in calls] == ["task/t1"] and calls[0].base_branch == "main"
    assert project.query("SELECT landed_commit FROM tasks") == [("ab" * 20,)]
    kinds = [row[0] for row in project.query("SELECT kind FROM events ORDER BY id")]
    assert kinds[-2:] == ["complete", "landed"]  # one transaction
    [payload] = project.query("SELECT payload FROM events WHERE kind = 'landed'")
    assert '"commit": "' + "ab" * 20 + '"' in payload[0]
    assert project.query("SELECT owner FROM land_locks") == [(None,)]  # freed
    assert check_invariants(project.db_url, allow_running=False) == []


def test_send_back_makes_land_to_ready_with_the_hint_in_a_new_run(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = landing_bench(bench, project)
    back = SendBack(hint="Landing on main conflicted in: keep.txt.", files=("keep.txt",))
    b.lander({"merge": answering(back, [])}).land_all()
    assert project.state("t1") == "implement"
    row = project.query("SELECT next_hint, hint_source, run FROM tasks")[0]
    assert row[0] == back.hint and row[1] == "landing" and row[2] >= 2
    explained = project.cli("explain", "t1")
    assert "sent back to implement" in explained.output and "keep.txt" in explained.output
    assert check_invariants(project.db_url, allow_running=False) == []


def test_refused_halts_with_a_reason_explain_names(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = landing_bench(bench, project)
    b.lander({"merge": answering(Refused("the push was refused"), [])}).land_all()
    assert project.state("t1") == "review:halted"
    assert project.query("SELECT halt_reason FROM tasks") == [("land_refused",)]
    explained = project.cli("explain", "t1").output
    assert "land_refused" in explained and "the push was refused" in explained


def test_pr_without_its_module_is_refused_not_a_crash(
    bench: Callable[..., Bench], project: Project
) -> None:
    import importlib.util

    b = landing_bench(bench, project, mode="pr")
    b.lander().land_all()
    if importlib.util.find_spec("orchestrator.features.landing.pull_request") is None:
        assert project.state("t1") == "review:halted"
        explained = project.cli("explain", "t1").output
        assert "pr landing is not available" in explained


def set_lock(project: Project, owner: str, expires: datetime) -> None:
    engine = create_engine(project.db_url)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM land_locks"))
        conn.execute(
            text("INSERT INTO land_locks (repository, owner, expires_at) VALUES (:r, :o, :e)"),
            {"r": str(project.dir / "repo"), "o": owner, "e": expires.replace(tzinfo=None)},
        )
    engine.dispose()


def test_a_lock_held_by_a_live_tick_elsewhere_leaves_the_task_landing(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = landing_bench(bench, project)
    calls: list[LandRequest] = []
    lander = b.lander({"merge": answering(Landed(commit="cd" * 20), calls)})
    set_lock(project, "other-host|boot|1|start", datetime.now(UTC) + timedelta(hours=1))
    lander.land_all(wait=False)
    assert project.state("t1") == "review:landing" and calls == []
    assert any("another landing holds it" in line for line in b.said)
    # Its lease over, the lock is ours.
    set_lock(project, "other-host|boot|1|start", datetime.now(UTC) - timedelta(seconds=1))
    lander.land_all(wait=False)
    assert project.state("t1") == "complete" and len(calls) == 1


def test_a_lock_held_by_a_dead_process_on_this_host_is_taken_at_once(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = landing_bench(bench, project)
    gone = subprocess.Popen(["true"])
    gone.wait()
    owner = f"{b.me.host}|{b.me.identity}|{gone.pid}|gone"
    set_lock(project, owner, datetime.now(UTC) + timedelta(hours=1))
    b.lander({"merge": answering(Landed(commit="ef" * 20), [])}).land_all(wait=False)
    assert project.state("t1") == "complete"


def test_a_task_landed_by_another_tick_while_waiting_is_not_landed_again(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = landing_bench(bench, project)
    calls: list[LandRequest] = []
    first = b.lander({"merge": answering(Landed(commit="12" * 20), calls)})
    [task] = first._landing()
    first.land(task)  # lands it
    first.land(task)  # the snapshot an earlier wait held: version moved
    assert len(calls) == 1
    assert [r[0] for r in project.query("SELECT kind FROM events")].count("landed") == 1


def held_locks(project: Project) -> list[tuple[object, ...]]:
    return project.query("SELECT repository, owner FROM land_locks WHERE owner IS NOT NULL")


@pytest.mark.parametrize(
    "outcome",
    [Landed(commit="ab" * 20), SendBack(hint="conflicted in a.txt"), Refused("no")],
    ids=["landed", "send_back", "refused"],
)
def test_the_lock_is_free_once_the_outcome_is_recorded(
    bench: Callable[..., Bench], project: Project, outcome: LandOutcome
) -> None:
    b = landing_bench(bench, project)
    b.lander({"merge": answering(outcome, [])}).land_all()
    assert project.state("t1") != "review:landing"
    assert held_locks(project) == []


def test_a_task_halted_while_it_lands_keeps_the_halt_and_frees_the_lock(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = landing_bench(bench, project)

    def halted_meanwhile(request: LandRequest) -> LandOutcome:
        assert project.cli("halt", "t1").exit_code == 0
        return Landed(commit="cd" * 20)

    b.lander({"merge": halted_meanwhile}).land_all()
    assert project.state("t1") == "review:halted"
    assert held_locks(project) == []


def test_a_mode_that_raises_frees_the_lock(bench: Callable[..., Bench], project: Project) -> None:
    b = landing_bench(bench, project)

    def broken(request: LandRequest) -> LandOutcome:
        raise RuntimeError("the mode broke")

    with pytest.raises(RuntimeError):
        b.lander({"merge": broken}).land_all()
    assert project.state("t1") == "review:landing"
    assert held_locks(project) == []


def test_a_task_moved_on_while_waiting_takes_no_lock(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = landing_bench(bench, project)
    lander = b.lander({"merge": answering(Landed(commit="12" * 20), [])})
    [task] = lander._landing()
    assert project.cli("halt", "t1").exit_code == 0
    lander.land(task)
    assert project.state("t1") == "review:halted"
    assert held_locks(project) == []
