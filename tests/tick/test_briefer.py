"""The briefer alone: what an attempt is told is read from the database
(its run's history) and written as `context.json`; a disk that refuses the
file lets the attempt run without it, noted as the host's fault."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from e2e.e2e_support import PASS, stage
from support import Project
from tick.tick_support import Bench

from orchestrator.agents.context_file import ContextFile
from orchestrator.domain.decide import Outcome
from orchestrator.domain.verdict import Verdict
from orchestrator.ext.model import AttemptRun
from orchestrator.tick.briefing import Briefer


def _briefer(b: Bench) -> Briefer:
    return Briefer(b.settings, b.tx, b.tick, b.notes)


def test_the_context_tells_the_run_so_far(bench: Callable[..., Bench], project: Project) -> None:
    b = bench(stage("only", worker=["true"], verifier=PASS, max_attempts=3))
    b.add("t1")
    verdict = Verdict(passed=False, score=0.3, reasons=("tests fail",), next_hint="fix them")
    b.recorder().record(b.claim(), AttemptRun(Outcome.FAILED, verdict=verdict))
    claim = b.claim()
    brief = _briefer(b).context(claim)
    assert isinstance(brief, ContextFile)
    assert brief.reasons == "- tests fail"
    folder = project.dir / "attempt"
    folder.mkdir()
    path = _briefer(b).write_context(brief, folder)
    assert path == folder / "context.json"
    written = json.loads(path.read_text())
    assert [row["outcome"] for row in written["history"]] == ["failed"]
    assert b.tick.report.host_fault is None


def test_a_context_file_the_disk_refuses_is_noted_not_fatal(
    bench: Callable[..., Bench], project: Project, tmp_path: Path
) -> None:
    b = bench(stage("only", worker=["true"], verifier=PASS))
    b.add("t1")
    brief = _briefer(b).context(b.claim())
    assert isinstance(brief, ContextFile)
    gone = tmp_path / "no-such-folder"
    assert _briefer(b).write_context(brief, gone) is None
    assert b.tick.report.host_fault is not None
    note = b.notes.take_capture(gone)
    assert note is not None
    assert note.startswith("context file not written: cannot write state_root")
