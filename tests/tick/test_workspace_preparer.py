"""The workspace preparer alone: a task's workspace is made once by the
pipeline's `setup` (which counts only once it exited 0), what an unfinished
setup left is made again, and a link in its place is refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from e2e.e2e_support import PASS, stage
from support import Project
from tick.tick_support import Bench

from orchestrator import runner
from orchestrator.ext.model import AttemptRun
from orchestrator.tick.attempt_context import AttemptContext
from orchestrator.tick.fence import FenceGuard
from orchestrator.tick.lookups import attempt_folder
from orchestrator.tick.workspaces import WorkspacePreparer

SETUP_CONFIG = '[pipelines.default]\nsetup = ["sh", "-c", "{setup}"]\n\n'


def _bench(bench: Callable[..., Bench], project: Project, setup: str) -> Bench:
    b = bench(stage("only", worker=["true"], verifier=PASS))
    text = project.config.read_text().replace(
        "[[pipelines.default.stages]]",
        SETUP_CONFIG.replace("{setup}", setup) + "[[pipelines.default.stages]]",
        1,
    )
    project.config.write_text(text)
    b.engine.dispose()
    return bench()


def _prepare(b: Bench) -> tuple[AttemptRun | None, Path]:
    claim = b.claim()
    folder = attempt_folder(b.settings, claim.task.slug, claim.stage.name, claim.number)
    folder.mkdir(parents=True, exist_ok=True)
    workspace = b.settings.workspace_root / claim.task.slug
    context = AttemptContext.of(claim, workspace)
    preparer = WorkspacePreparer(b.settings, b.tx, b.commands())
    guard = FenceGuard(b.tick, b.tx, claim)
    result = preparer.prepare(claim, context, folder, guard, runner.process_tag(claim.token))
    b.recorder().release(claim)  # the next claim of the test is attempt n + 1
    return result, workspace


def test_setup_makes_the_workspace_once(bench: Callable[..., Bench], project: Project) -> None:
    count = project.dir / "setups"
    b = _bench(bench, project, f'mkdir \\"$ORCHESTRATOR_WORKSPACE\\"; echo x >> {count}')
    b.add("t1")
    result, workspace = _prepare(b)
    assert result is None  # ready
    assert workspace.is_dir()
    marker = json.loads((b.settings.state_root / "t1" / "setup.json").read_text())
    assert marker == {"state": "done", "attempt": 1}
    assert _prepare(b)[0] is None
    assert count.read_text() == "x\n"  # not run again


def test_a_failed_setup_fails_the_attempt_and_runs_again(
    bench: Callable[..., Bench], project: Project
) -> None:
    flag = project.dir / "fail"
    flag.touch()
    b = _bench(bench, project, f'mkdir \\"$ORCHESTRATOR_WORKSPACE\\"; test ! -e {flag}')
    b.add("t1")
    result, workspace = _prepare(b)
    assert result is not None
    assert result.outcome.value == "worker_error"
    assert result.error == "setup exited 1"
    assert workspace.is_dir()  # what it left ...
    flag.unlink()
    assert _prepare(b)[0] is None  # ... removed and set up again
    marker = json.loads((b.settings.state_root / "t1" / "setup.json").read_text())
    assert marker == {"state": "done", "attempt": 2}


def test_a_link_in_the_workspace_place_is_refused(
    bench: Callable[..., Bench], project: Project, tmp_path: Path
) -> None:
    b = bench(stage("only", worker=["true"], verifier=PASS))
    b.add("t1")
    b.settings.workspace_root.mkdir(parents=True)
    (b.settings.workspace_root / "t1").symlink_to(tmp_path)
    result, workspace = _prepare(b)
    assert result is not None
    assert result.error == f"workspace {workspace} is a link; refusing to follow it"
