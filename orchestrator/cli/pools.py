"""`orchestrator pool list` and `orchestrator pool resume NAME`."""

from __future__ import annotations

import click

from orchestrator.cli.app import App, human_only, pass_app
from orchestrator.cli.output import emit_json, emit_rows


@click.group("pool")
def pool() -> None:
    """Agent pools: what they run, spend and wait for; end a pause by hand."""


@pool.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the pools as JSON.")
@pass_app
def pool_list(app: App, as_json: bool) -> None:
    """Each pool: attempts running of its cap, spent today (UTC), paused until."""
    rows = [row.to_dict() for row in app.project().pools()]
    if as_json:
        emit_json(rows)
        return
    columns = [
        "pool",
        "running",
        "max_running",
        "spent_today_usd",
        "max_usd_per_day",
        "paused_until",
        "pause_reason",
    ]
    emit_rows(columns, [[r[c] for c in columns] for r in rows], "table")


@pool.command("resume")
@click.argument("name")
@click.option("--by", metavar="NAME", help="Who is acting (default: the login name).")
@pass_app
def pool_resume(app: App, name: str, by: str | None) -> None:
    """End NAME's pause now: its tasks are claimed again at the next tick."""
    human_only()
    click.echo(app.project().resume_pool(name, by=by).message)
