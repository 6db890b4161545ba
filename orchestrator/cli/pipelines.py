"""`orchestrator pipelines`: each pipeline's versions and their unfinished tasks."""

from __future__ import annotations

import click

from orchestrator.cli.app import App, pass_app
from orchestrator.cli.output import emit_json, emit_rows, short_time


@click.command("pipelines")
@click.option("--json", "as_json", is_flag=True, help="Print the pipelines as JSON.")
@pass_app
def pipelines(app: App, as_json: bool) -> None:
    """Each pipeline's versions: which is current, and where their unfinished tasks stand."""
    views = app.project().pipelines()
    if as_json:
        emit_json([view.to_dict() for view in views])
        return
    from orchestrator.features.versions.views import short

    columns = ["pipeline", "version", "current", "first_seen", "host", "unfinished", "stages"]
    rows = [
        [
            view.pipeline,
            short(v.version),
            "yes" if v.current else "",
            short_time(v.first_seen) if v.first_seen else "-",
            v.host or "-",
            v.unfinished,
            ", ".join(f"{stage}: {v.stages[stage]}" for stage in sorted(v.stages)),
        ]
        for view in views
        for v in view.versions
    ]
    emit_rows(columns, rows, "table")
