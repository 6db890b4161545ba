"""`history`, `scores`, `sql`: reading what happened."""

from __future__ import annotations

import dataclasses

import click

from orchestrator.cli.app import App, pass_app
from orchestrator.cli.output import emit_rows, format_options, short_time


@click.command()
@click.argument("slug", required=False)
@click.option(
    "--limit", type=click.IntRange(min=1), help="Only the newest N rows (printed oldest first)."
)
@format_options()
@pass_app
def history(app: App, slug: str | None, limit: int | None, fmt: str | None) -> None:
    """Print transitions, oldest first: every task, or SLUG's."""
    rows = app.project().history(slug, limit)
    columns = ["task", "seq", "at", "from_state", "to_state", "event", "actor", "reason", "note"]
    if fmt is None:
        rows = [dataclasses.replace(r, at=short_time(r.at)) for r in rows]
    emit_rows(columns, [[getattr(r, c) for c in columns] for r in rows], fmt or "table")


@click.command()
@click.argument("slug")
@click.option("--stage", help="Only this stage.")
@format_options()
@pass_app
def scores(app: App, slug: str, stage: str | None, fmt: str | None) -> None:
    """Print SLUG's score history: one row per attempt with a valid verdict."""
    rows = app.project().scores(slug, stage)
    columns = ["stage", "attempt", "run", "score", "pass", "outcome", "cost_usd", "at"]
    table: list[list[object]] = [list(r.to_dict().values()) for r in rows]
    if not fmt:  # the one time format of tables; JSON and CSV keep the full ISO time
        table = [[*row[:-1], short_time(r.at)] for row, r in zip(table, rows, strict=True)]
    emit_rows(columns, table, fmt or "table")


@click.command()
@click.argument("query")
@format_options()
@pass_app
def sql(app: App, query: str, fmt: str | None) -> None:
    """Run one read-only SQL QUERY against the history.

    Tables: tasks, attempts, transitions, ticks; views: task_states,
    score_history, timeline (docs/reference/sql.md). The database refuses
    writes; a bad query exits 1.
    """
    columns, rows = app.project().sql(query)
    emit_rows(columns, rows, fmt or "table")
