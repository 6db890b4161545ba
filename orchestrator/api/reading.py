"""The views `Project`'s reads build from the read side's JSON objects: a
task with its gate, `explain`, the events with their deliveries.

Kept out of `project.py` so that the class stays the library's face (its
signatures and docstrings, which the reference renders) and what each read
assembles is read on its own. Heavy imports stay inside the functions: a
`list` must not load what `show` needs.
"""

from __future__ import annotations

import dataclasses

from sqlalchemy import Engine

from orchestrator.api.results import Delivery, EventView
from orchestrator.api.types import (
    ExplainView,
    GateChange,
    GateFacts,
    JsonObject,
    PipelineView,
    PoolView,
    TaskView,
    Transition,
    VersionView,
    Wait,
    WaitOn,
    of_json,
)
from orchestrator.config import Settings
from orchestrator.storage.db import read_tx
from orchestrator.views import reports


def task_view(engine: Engine, settings: Settings, slug: str) -> TaskView:
    """`Project.task`: `show --json`, with the gate's facts at a gate."""
    data = reports.show_task(engine, slug, settings.state_root)
    gate = None
    if data["status"] == "awaiting_approval":
        from orchestrator.views.gate import gate_view

        view = gate_view(engine, settings, slug)
        answer = None if view.answer is None else view.answer.text
        gate = GateFacts(view.digest, answer)
        if view.branch is not None:  # the whole change, then this stage's part
            whole, part = (
                None if p is None else GateChange(p.base, p.files)
                for p in (view.branch.whole, view.branch.stage)
            )
            gate = GateFacts(view.digest, answer, whole, part, branch=True)
    return of_json(
        TaskView,
        data,
        after=tuple(Wait(w["slug"], w["state"]) for w in data["after"]),
        transitions=tuple(of_json(Transition, t) for t in data["transitions"]),
        change=_branch(engine, settings, slug),
        gate=gate,
    )


def _branch(engine: Engine, settings: Settings, slug: str) -> JsonObject | None:
    """Where a branch task's change is (None for a folder task)."""
    from orchestrator.storage import repo
    from orchestrator.views.branch import branch_state

    with read_tx(engine) as conn:
        task = repo.get_task(conn, slug)
    state = None if task is None else branch_state(settings, task)
    return None if state is None else state.as_dict()


def explain_view(engine: Engine, settings: Settings, slug: str) -> ExplainView:
    """`Project.explain`: `explain --json`, its waits and pool as views."""
    from orchestrator import compose
    from orchestrator.views.explain import explain_task

    data = explain_task(engine, settings, slug, [v for _, v in compose.explainers()])
    pool = data["pool"]
    engine_keys = {f.name for f in dataclasses.fields(ExplainView)}
    return of_json(
        ExplainView,
        data,
        waits_on=tuple(of_json(WaitOn, w) for w in data["waits_on"]),
        pool=None if pool is None else of_json(PoolView, pool),
        features={k: v for k, v in data.items() if k not in engine_keys},
        notes=tuple(data.get("notes", ())),
    )


def pipeline_views(engine: Engine, settings: Settings) -> list[PipelineView]:
    """`Project.pipelines`: `pipelines --json`, each version as a view."""
    from orchestrator.features.versions.views import pipeline_versions

    with read_tx(engine) as conn:
        rows = pipeline_versions(conn, settings)
    return [
        of_json(PipelineView, row, versions=tuple(of_json(VersionView, v) for v in row["versions"]))
        for row in rows
    ]


def event_views(
    engine: Engine, settings: Settings, *, pending: bool, limit: int | None
) -> list[EventView]:
    """`Project.events`: `events --json`, each with its deliveries as views."""
    from orchestrator.events.listing import list_events

    with read_tx(engine) as conn:
        rows = list_events(conn, pending=pending, limit=limit, hooks=bool(settings.hooks))
    return [
        of_json(
            EventView,
            row,
            deliveries=tuple(of_json(Delivery, d) for d in row["deliveries"]),
        )
        for row in rows
    ]
