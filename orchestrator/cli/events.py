"""The `events` command (registered by the CLI with one line): prints
`Project.events`."""

from __future__ import annotations

import json
from typing import Any

import click


@click.command("events")
@click.option("--pending", is_flag=True, help="Only events some hook has not received yet.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, with each event's payload.")
@click.option(
    "--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Newest N."
)
@click.pass_obj
def events_command(app: Any, pending: bool, as_json: bool, limit: int) -> None:
    """List events (awaiting_approval, halted, complete, crashed) and their hook deliveries."""
    from orchestrator.events.listing import delivery_summary

    rows = app.project().events(pending=pending, limit=limit)
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in rows], indent=2, ensure_ascii=False))
        return
    if not rows:
        click.echo("no pending events" if pending else "no events yet")
        return
    from orchestrator.cli.output import table as _table

    click.echo(
        _table(
            ["id", "at", "event", "task", "state", "reason", "deliveries"],
            [
                [
                    r.id,
                    r.at[:19].replace("T", " "),
                    r.kind,
                    r.task,
                    r.state,
                    r.reason or "",
                    delivery_summary(r.to_dict()),
                ]
                for r in rows
            ],
        )
    )
