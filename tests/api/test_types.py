"""The views `Project` returns: each `to_dict()` is, byte for byte, the JSON
object the read side builds for the commands (and the CLI prints); the old
item access still works for one release, with a warning; and migrate,
events, metrics and prune do through the library what their commands do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import Project as ProjectDir

from orchestrator import Project
from orchestrator.api.pools import pool_list
from orchestrator.api.types import HistoryRow, ScoreRow, TaskRow, TaskView
from orchestrator.config import load_settings
from orchestrator.errors import RefusedError, SchemaError
from orchestrator.events.listing import list_events
from orchestrator.storage.db import read_tx
from orchestrator.storage.schema import HEAD
from orchestrator.views import reports
from orchestrator.views.explain import explain_task


def same_json(view: object, raw: object) -> None:
    assert json.dumps(view, indent=2, ensure_ascii=False) == json.dumps(
        raw, indent=2, ensure_ascii=False
    )


def without_clock(explained: dict[str, Any]) -> dict[str, Any]:
    """`explain` read twice differs only by the clock: `now` and a gate's wait."""
    gate = explained["gate"]
    return {
        **explained,
        "now": None,
        "gate": gate if gate is None else {**gate, "waited_seconds": None},
    }


def test_every_view_prints_what_the_read_side_built(project: ProjectDir) -> None:
    """One task at its gate, one finished: the views against the dicts they wrap."""
    with Project.open(project.config, db=project.db_url) as face:
        face.add("a", "A", body="é and ü stay as they are")
        face.add("b", "B")
        assert face.tick().exit_status == 0
        face.approve("b", by="ann")
        assert face.tick().exit_status == 0
        engine, stages = face.engine, {"research", "implement"}

        same_json([r.to_dict() for r in face.tasks()], reports.list_tasks(engine, None, stages))
        same_json([r.to_dict() for r in face.history()], reports.history(engine))
        same_json([r.to_dict() for r in face.history("a", 1)], reports.history(engine, "a", 1))
        for slug in ("a", "b"):
            same_json(
                [r.to_dict() for r in face.scores(slug)], reports.scores(engine, slug, None, stages)
            )
            same_json(
                without_clock(face.explain(slug).to_dict()),
                without_clock(explain_task(engine, face.settings, slug)),
            )
        same_json([p.to_dict() for p in face.pools()], pool_list(engine, face.settings))
        with read_tx(engine) as conn:
            events = list_events(conn, pending=False, limit=50, hooks=False)
        same_json([e.to_dict() for e in face.events()], events)

        # show: the read side's keys in order, then where the change is, then the gate's.
        shown = reports.show_task(engine, "a", face.settings.state_root)
        gate = face.task("a")
        assert list(gate.to_dict()) == [*shown, "change", "approval_hash", "answer"]
        same_json({k: gate.to_dict()[k] for k in shown}, shown)
        assert gate.approval_hash is not None and gate.approval_hash == gate.gate.approval_hash
        assert list(face.task("b").to_dict()) == [*shown, "change"]


def test_the_views_are_typed_attributes(project: ProjectDir) -> None:
    with Project.open(project.config, db=project.db_url) as face:
        face.add("a", "A", after=())
        face.add("b", "B", after=["a"])
        assert face.tick().exit_status == 0
        row = face.tasks()[0]
        assert isinstance(row, TaskRow) and row.state == "research:awaiting_approval"
        with pytest.raises(AttributeError):
            row.state = "x"  # type: ignore[misc]
        task = face.task("b")
        assert isinstance(task, TaskView)
        assert [(w.slug, w.state) for w in task.after] == [("a", "research:awaiting_approval")]
        assert task.gate is None and task.approval_hash is None
        assert [w.slug for w in face.explain("b").waits_on] == ["a"]
        (score,) = face.scores("a")
        assert isinstance(score, ScoreRow) and score.passed is True
        assert score.to_dict()["pass"] is True and "passed" not in score.to_dict()
        assert isinstance(face.history("a")[-1], HistoryRow)


def test_item_access_still_works_with_a_deprecation_warning(project: ProjectDir) -> None:
    """Callers of the old dicts keep working for one release, and are told."""
    with Project.open(project.config, db=project.db_url) as face:
        face.add("a", "A")
        face.tick()
        with pytest.warns(DeprecationWarning, match=r"TaskRow\['slug'\] is deprecated"):
            assert face.tasks()[0]["slug"] == "a"
        with pytest.warns(DeprecationWarning, match="use the attribute"):
            assert face.task("a")["approval_hash"] == face.task("a").approval_hash
        with pytest.warns(DeprecationWarning), pytest.raises(KeyError):
            face.scores("a")[0]["passed"]  # the key stays `pass`, as the JSON has it


def test_migrate_creates_upgrades_and_takes_back(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    settings = load_settings(db_url=url, environ={}, cwd=tmp_path)
    with pytest.raises(SchemaError, match="database not found"):
        Project.schema_revision(settings)  # as `db current`: nothing is created by accident
    done = Project.migrate(settings)
    assert (done.before, done.after, done.created) == (None, HEAD, True)
    assert Project.migrate(settings).to_dict() == {
        "before": HEAD,
        "after": HEAD,
        "created": False,
    }
    assert Project.schema_revision(settings).to_dict() == {"database": HEAD, "code": HEAD}
    gone = Project.migrate(settings, "base", down=True)
    assert (gone.before, gone.after) == (HEAD, None)
    assert Project.schema_revision(settings).database is None


def test_events_metrics_and_prune(project: ProjectDir, tmp_path: Path) -> None:
    with Project.open(project.config, db=project.db_url) as face:
        assert face.events() == []
        face.add("a", "A")
        face.tick()
        (event,) = face.events()
        assert (event.kind, event.task, event.state) == (
            "awaiting_approval",
            "a",
            "research:awaiting_approval",
        )
        assert face.events(pending=True) == []  # no hook is configured
        metrics = face.metrics()
        assert "orchestrator_tasks" in metrics.text
        target = tmp_path / "orchestrator.prom"
        metrics.write_textfile(target)
        assert target.read_bytes() == metrics.exposition
        with pytest.raises(RefusedError, match="older_than, finished, or both"):
            face.prune()
        heard: list[object] = []
        result = face.prune(older_than=0, finished=True, dry_run=True, on_worktree=heard.append)
        assert (result.dry_run, result.worktrees, result.folders, heard) == (True, (), (), [])
        assert result.freed == 0
