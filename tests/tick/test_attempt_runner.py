"""The attempt runner alone, on a real database with real processes: one
claimed attempt is run (workspace, prompt, worker, verifier) and recorded;
a failing worker, a missing verdict and a stopped tick each end it as they
should, with the attempt's files in its state folder."""

from __future__ import annotations

from collections.abc import Callable

from e2e.e2e_support import PASS, agent, stage
from support import Project, check_invariants
from tick.tick_support import Bench

from orchestrator.tick.lookups import attempt_folder


def _attempt_of(project: Project) -> tuple[str, str | None, int | None]:
    [row] = project.query("SELECT outcome, error, worker_exit FROM attempts")
    return row


def test_an_attempt_runs_and_is_recorded(bench: Callable[..., Bench], project: Project) -> None:
    prompt = project.dir / "prompt.md"
    prompt.write_text("Do {task} at {stage}, attempt {attempt}.")
    b = bench(
        stage("only", worker=["cat", "{prompt_file}"], verifier=PASS, prompt=str(prompt)),
    )
    b.add("t1")
    claim = b.claim()
    ready, following = b.attempts().attempt(claim, None)
    assert (ready, following) == (False, None)  # complete: never ready again
    assert _attempt_of(project) == ("passed", None, 0)
    assert project.state("t1") == "complete"
    folder = attempt_folder(b.settings, "t1", "only", 1)
    assert (folder / "worker.out").read_text() == "Do t1 at only, attempt 1."
    assert (folder / "context.json").is_file()
    assert not (folder / "result.json").exists()  # the reserve, given back once recorded
    assert (b.settings.workspace_root / "t1").is_dir()
    assert check_invariants(project.db_url, allow_running=False) == []


def test_a_failing_worker_is_a_worker_error(bench: Callable[..., Bench], project: Project) -> None:
    b = bench(stage("only", worker=["sh", "-c", "echo broke >&2; exit 3"], verifier=PASS))
    b.add("t1")
    b.attempts().attempt(b.claim(), None)
    assert _attempt_of(project) == ("worker_error", "worker exited 3: broke", 3)
    assert project.state("t1") == "only"


def test_no_verdict_is_an_invalid_verdict(bench: Callable[..., Bench], project: Project) -> None:
    b = bench(stage("only", worker=["true"], verifier=agent("--verdict", "not json")))
    b.add("t1")
    b.attempts().attempt(b.claim(), None)
    outcome, error, _ = _attempt_of(project)
    assert outcome == "invalid_verdict"
    assert error is not None
    assert error.startswith("no JSON verdict in the verifier's output (verifier exited 0)")


def test_a_stopped_tick_interrupts_the_attempt(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = bench(stage("only", worker=["sleep", "30"], verifier=PASS))
    b.add("t1")
    claim = b.claim()
    b.tick.stop.set()  # seen at the worker's first poll
    b.attempts().attempt(claim, None)
    assert _attempt_of(project)[:2] == ("interrupted", "worker stopped: the tick was interrupted")
    assert project.state("t1") == "only"
    assert b.tick.report.outcomes == {"interrupted": 1}
