"""The library face is typed all the way down: a script calling every public
method of `Project` passes `mypy --strict` with no expression of type `Any`
(a method returning `dict[str, Any]` would fail it), and the reference page
is what `python -m orchestrator.api.docs` renders from the code."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from orchestrator import Project
from orchestrator.api import docs

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    from pathlib import Path

    from orchestrator import Project, TaskSpec
    from orchestrator.api.results import (
        CalibrateResult, EventView, Metrics, MigrateResult, PruneResult, RemovedWorktree,
        RestoreResult, SchemaRevision,
    )
    from orchestrator.api.types import (
        ExplainView, HistoryRow, PipelineView, PoolView, ScoreRow, TaskRow, TaskView,
    )
    from orchestrator.config import load_settings


    def heard(item: RemovedWorktree) -> None:
        print(item.workspace, item.branch, item.error)


    def use(project: Project) -> None:
        project.add("a", "A", after=["b"])
        added: int = project.add_many([TaskSpec("b", "B")])
        changed: bool = project.approve("a", expect="x").changed
        state: str = project.reject("a", "note", to="research").state
        message: str = project.halt("a").message + project.resume("a", budget=1.0).message
        message += project.cancel("a").message + project.resume_pool("p").message
        restored: RestoreResult = project.restore("a", 1, stage="research")
        commit: str | None = restored.commit
        spread: CalibrateResult = project.calibrate("a", "research", 3)
        mean: float = spread.mean
        exit_status: int = project.tick(max_tasks=1, say=print, warn=print).exit_status
        rows: list[TaskRow] = project.tasks("halted")
        score: float | None = rows[0].score
        pools: list[PoolView] = project.pools()
        paused: bool = pools[0].paused
        pipelines: list[PipelineView] = project.pipelines()
        current: str | None = pipelines[0].versions[0].version
        task: TaskView = project.task("a")
        approval: str | None = task.approval_hash
        diff: str = project.diff("a", stage="research", stat=True)
        why: ExplainView = project.explain("a")
        next_tick: str = why.next_tick
        history: list[HistoryRow] = project.history("a", 5)
        actor: str | None = history[0].actor
        scores: list[ScoreRow] = project.scores("a", "research")
        passed: bool | None = scores[0].passed
        events: list[EventView] = project.events(pending=True, limit=3)
        kind: str = events[0].kind
        metrics: Metrics = project.metrics()
        text: str = metrics.text
        pruned: PruneResult = project.prune(older_than=3.0, finished=True, on_worktree=heard)
        freed: int = pruned.freed
        columns, cells = project.sql("SELECT 1")
        first: list[str] = columns
        settings = load_settings(db_url="sqlite:///x.db")
        migrated: MigrateResult = Project.migrate(settings, "head", force=True)
        after: str | None = migrated.after
        revision: SchemaRevision = Project.schema_revision(settings)
        code: str = revision.code
        plain: dict[str, object] = task.to_dict()
        print(added, changed, state, message, commit, mean, exit_status, score, paused,
              approval, diff, next_tick, actor, passed, kind, text, freed, first, cells,
              after, code, plain, current)
        project.close()


    with Project.open("orchestrator.toml", db="sqlite:///x.db") as opened:
        use(opened)
    """
)


def public_methods() -> set[str]:
    return {
        name
        for name, member in vars(Project).items()
        if not name.startswith("_") and inspect.isfunction(getattr(member, "__func__", member))
    }


def test_the_script_calls_every_public_method() -> None:
    called = set(re.findall(r"(?:project|Project)\.(\w+)\(", SCRIPT))
    assert public_methods() - {"open"} <= called, public_methods() - called
    assert "open" in SCRIPT


def test_every_public_method_is_typed_without_any(tmp_path: Path) -> None:
    script = tmp_path / "face.py"
    script.write_text(SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--disallow-any-expr",
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--config-file",
            str(ROOT / "pyproject.toml"),
            str(script),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_reference_page_is_rendered_from_the_code() -> None:
    page = docs.PAGE.read_text(encoding="utf-8")
    assert docs.BEGIN in page and docs.END in page
    assert docs.page_with(page, docs.render()) == page, (
        "docs/reference/python.md is behind the code: run `python -m orchestrator.api.docs --write`"
    )
    rendered = docs.render()
    for name in public_methods():
        assert f".{name}(" in rendered, name


def test_a_changed_docstring_shows_as_a_stale_page() -> None:
    page = docs.PAGE.read_text(encoding="utf-8")
    stale = page.replace("Column names and rows of one read-only query.", "Old words.")
    assert stale != page
    assert docs.page_with(stale, docs.render()) == page
