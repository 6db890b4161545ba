"""Traces of real ticks, read by a real OTLP/HTTP receiver (`otlp_receiver`):
one span per attempt with its commands as children and the GenAI
attributes from what the agent reported, one trace per task run across
ticks, and a collector that is down or failing changes nothing of the tick."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from e2e.e2e_support import PASS, stage
from otlp_receiver import closed_port, otlp_receiver
from support import Project, make_repo

from orchestrator.features.telemetry.spans import attempt_span

MODEL = "claude-test-1"


def _agent(tmp_path: Path) -> list[str]:
    """A worker named `claude` (so its provider is known) that reports its
    usage as any agent may: `$ORCHESTRATOR_USAGE_FILE`."""
    program = tmp_path / "bin" / "claude"
    program.parent.mkdir()
    program.write_text(
        "#!/bin/sh\n"
        'printf \'{"input_tokens": 1200, "output_tokens": 340, "cost_usd": 0.02}\' '
        '> "$ORCHESTRATOR_USAGE_FILE"\n'
    )
    program.chmod(0o755)
    return [str(program), "--model", MODEL, "-p", "{task}"]


def _tick(
    project: Project, endpoint: str | None, *args: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    env = project.process_env()
    env.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    if endpoint is not None:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "tick", "-q", *args],
        cwd=project.dir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return done, time.monotonic() - started


def _tasks(project: Project, count: int) -> None:
    for index in range(count):
        assert project.cli("add", f"t{index}", "--title", "t").exit_code == 0


def test_a_tick_of_ten_attempts_exports_each_with_its_commands(
    project: Project, tmp_path: Path
) -> None:
    project.write_config(stage("build", worker=_agent(tmp_path), verifier=PASS))
    _tasks(project, 10)
    with otlp_receiver() as receiver:
        done, _ = _tick(project, receiver.url)
        assert done.returncode == 0, done.stderr
        spans = receiver.wait_for(1 + 10 * 3)  # the tick, 10 attempts, worker + verifier
    attempts = [s for s in spans if s.name == "attempt build"]
    assert len(attempts) == 10
    assert {s.attributes["orchestrator.task"] for s in attempts} == {f"t{i}" for i in range(10)}
    [tick] = [s for s in spans if s.name == "tick"]
    assert tick.attributes["orchestrator.tick.claimed"] == 10
    for attempt in attempts:
        assert attempt.parent_id == ""  # its run's trace, not the tick's
        assert attempt.attributes["gen_ai.system"] == "anthropic"
        assert attempt.attributes["gen_ai.request.model"] == MODEL
        assert attempt.attributes["gen_ai.usage.input_tokens"] == 1200
        assert attempt.attributes["gen_ai.usage.output_tokens"] == 340
        assert attempt.attributes["orchestrator.cost_usd"] == 0.02
        assert attempt.attributes["orchestrator.verdict"] == "pass"
        assert attempt.attributes["orchestrator.score"] == 1.0
        assert attempt.attributes["orchestrator.stage"] == "build"
        assert attempt.attributes["orchestrator.attempt"] == 1
        assert (tick.trace_id, tick.span_id) in attempt.links
        children = [s for s in spans if s.parent_id == attempt.span_id]
        assert sorted(c.name for c in children) == ["verifier", "worker"]
        assert all(c.trace_id == attempt.trace_id for c in children)
        assert all(attempt.start_ns <= c.start_ns <= c.end_ns <= attempt.end_ns for c in children)
        [worker] = [c for c in children if c.name == "worker"]
        assert worker.attributes["gen_ai.usage.input_tokens"] == 1200
        assert worker.attributes["process.exit.code"] == 0
    assert len({s.trace_id for s in attempts}) == 10  # one trace per task run


def test_a_task_run_is_one_trace_across_ticks(project: Project, tmp_path: Path) -> None:
    """The second attempt, a tick later, joins its run's trace and links to
    the first attempt's span (found again from its row, nothing stored)."""
    flag = tmp_path / "passed-once"
    verifier = [
        "sh",
        "-c",
        f'if [ -e {flag} ]; then echo \'{{"pass": true, "score": 1}}\'; '
        f'else touch {flag}; echo \'{{"pass": false, "score": 0.2}}\'; fi',
    ]
    project.write_config(stage("build", worker=["true"], verifier=verifier))
    _tasks(project, 1)
    with otlp_receiver() as receiver:
        assert _tick(project, receiver.url, "--max-tasks", "1")[0].returncode == 0
        receiver.wait_for(4)
        assert _tick(project, receiver.url, "--max-tasks", "1")[0].returncode == 0
        spans = receiver.wait_for(8)
    ticks = [s for s in spans if s.name == "tick"]
    assert len(ticks) == 2
    first, second = sorted(
        (s for s in spans if s.name == "attempt build"), key=lambda s: s.start_ns
    )
    assert first.attributes["orchestrator.verdict"] == "fail"
    assert second.attributes["orchestrator.verdict"] == "pass"
    assert first.trace_id == second.trace_id
    assert (first.trace_id, first.span_id) in second.links
    assert {(t.trace_id, t.span_id) for t in ticks} == {
        link for link in (*first.links, *second.links) if link[0] != first.trace_id
    }
    [(first_id,), (_,)] = project.query("SELECT id FROM attempts ORDER BY id")
    assert first.span_id == f"{attempt_span(int(first.trace_id, 16), first_id):016x}"


def test_a_collector_down_leaves_the_tick_as_it_was(project: Project, tmp_path: Path) -> None:
    """Nobody listens: the tick passes its attempts and exits 0, says once
    how many spans were not exported, and does not wait for the exporter's
    retries (its flush bound is 2 s; the exporter's, 5 s)."""
    project.write_config(stage("build", worker=_agent(tmp_path), verifier=PASS))
    _tasks(project, 3)
    done, _ = _tick(project, closed_port())
    assert done.returncode == 0, done.stderr
    assert project.query("SELECT outcome FROM attempts") == [("passed",)] * 3
    assert "telemetry: 10 span(s) not exported" in done.stderr
    # How long it takes is the bench's to time (bench/telemetry.py, collector down).


def test_a_collector_answering_500_counts_its_drops(project: Project, tmp_path: Path) -> None:
    project.write_config(stage("build", worker=_agent(tmp_path), verifier=PASS))
    _tasks(project, 2)
    with otlp_receiver() as receiver:
        receiver.failing = True
        done, _ = _tick(project, receiver.url)
    assert done.returncode == 0, done.stderr
    assert project.query("SELECT outcome FROM attempts") == [("passed",)] * 2
    assert "telemetry: 7 span(s) not exported" in done.stderr
    assert receiver.requests >= 1 and receiver.spans == []


def _modules_after_tick(project: Project, endpoint: str | None) -> set[str]:
    code = textwrap.dedent(
        """
        import atexit, json, sys
        atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))
        from orchestrator.cli import main
        main(["tick", "-q"])
        """
    )
    env = project.process_env()
    env.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    if endpoint is not None:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=project.dir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_telemetry_off_or_idle_imports_no_sdk(project: Project) -> None:
    """Off: a tick that runs an attempt loads neither the SDK nor the
    feature's spans. On, with nothing to do: the hooks are built and the
    SDK is still not loaded (an idle tick makes no span)."""
    project.write_config(stage("build", worker=["true"], verifier=PASS))
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    off = _modules_after_tick(project, None)
    assert project.query("SELECT outcome FROM attempts") == [("passed",)]
    assert "orchestrator.features.telemetry.spans" not in off
    assert not [m for m in off if m.startswith("opentelemetry")]
    idle = _modules_after_tick(project, closed_port())
    assert "orchestrator.features.telemetry.spans" in idle
    assert not [m for m in idle if m.startswith("opentelemetry")]


def test_a_landing_is_a_span_of_its_runs_trace(project: Project) -> None:
    """A task that passes and lands (merge) in the same tick: its landing's
    span is in its run's trace, after the attempt it landed, with the
    commit it landed."""
    make_repo(project.dir)
    project.write_config(
        '[pipelines.default]\nrepository = "repo"\nland = "merge"\n\n'
        + stage("build", worker=["sh", "-c", "echo made > made.txt"], verifier=PASS)
    )
    _tasks(project, 1)
    with otlp_receiver() as receiver:
        done, _ = _tick(project, receiver.url)
        assert done.returncode == 0, done.stderr
        spans = receiver.wait_for(5)  # tick, attempt, worker, verifier, landing
    assert project.state("t0") == "complete"
    [landing] = [s for s in spans if s.name == "landing"]
    [attempt] = [s for s in spans if s.name == "attempt build"]
    [tick] = [s for s in spans if s.name == "tick"]
    [(commit,)] = project.query("SELECT landed_commit FROM tasks")
    assert landing.trace_id == attempt.trace_id
    assert (attempt.trace_id, attempt.span_id) in landing.links
    assert (tick.trace_id, tick.span_id) in landing.links
    assert landing.attributes["orchestrator.landing.outcome"] == "landed"
    assert landing.attributes["orchestrator.landing.commit"] == commit
    assert landing.attributes["orchestrator.task"] == "t0"
    assert attempt.end_ns <= landing.end_ns


def test_a_stalled_collector_costs_the_tick_its_flush_bound_and_no_more(
    project: Project, tmp_path: Path
) -> None:
    """A collector that takes every request and never answers: the spans
    past the queue's bound are dropped as they come, the tick's end waits
    `flush_seconds` and no longer (not `export_timeout`), and every span
    is counted, the full queue's apart."""
    with otlp_receiver() as receiver:
        receiver.stalled.set()
        project.write_config(
            f'[telemetry]\notlp_endpoint = "{receiver.url}"\n'
            "queue_size = 2\nflush_seconds = 0.5\nexport_timeout = 3600\n\n"
            + stage("build", worker=_agent(tmp_path), verifier=PASS)
        )
        _tasks(project, 3)
        done, _ = _tick(project, None)
        assert receiver.requests >= 1  # the first batch went out and hangs
        # The tick ended while that request was still unanswered: its end
        # waited the flush bound, not the exporter's hour-long timeout.
        assert receiver.answered == 0
    assert done.returncode == 0, done.stderr
    assert project.query("SELECT outcome FROM attempts") == [("passed",)] * 3
    [said] = [line for line in done.stderr.splitlines() if "telemetry:" in line]
    assert "telemetry: 10 span(s) not exported" in said
    assert "of them met a full queue" in said


def test_an_endpoint_without_the_sdk_says_how_to_install_it(project: Project) -> None:
    """The variable set for other programs, the extra not installed (here:
    its import refused): the tick passes its attempt and says what is
    missing, once."""
    project.write_config(stage("build", worker=["true"], verifier=PASS))
    _tasks(project, 2)
    code = textwrap.dedent(
        """
        import sys
        sys.modules["opentelemetry"] = None  # as if `orchestrator[telemetry]` were not installed
        from orchestrator.cli import main
        main(["tick", "-q"])
        """
    )
    env = {**project.process_env(), "OTEL_EXPORTER_OTLP_ENDPOINT": closed_port()}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=project.dir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert project.query("SELECT outcome FROM attempts") == [("passed",)] * 2
    said = [line for line in done.stderr.splitlines() if "telemetry:" in line]
    assert len(said) == 1
    assert "telemetry: cannot load the OpenTelemetry SDK (" in said[0]
    assert "is 'orchestrator[telemetry]' installed?" in said[0]
