"""`orchestrator intake --dry-run`: what the next tick's intake would add.
The command is handed the CLI's object (its settings and database) by
click, duck-typed: a feature imports no CLI module."""

from __future__ import annotations

from typing import Any

import click


@click.command("intake")
@click.option(
    "--dry-run", is_flag=True, required=True, help="List what would be added; change nothing."
)
@click.pass_obj
def intake(app: Any, dry_run: bool) -> None:
    """Issues with the intake's label that would become tasks."""
    from sqlalchemy import inspect

    from orchestrator.features.intake import store
    from orchestrator.features.intake.config import intakes
    from orchestrator.features.intake.sync import slug_of, title_of, tracker_for
    from orchestrator.features.intake.tracker import Fault, Unchanged
    from orchestrator.storage.db import read_tx

    settings = app.settings(require_config=True)
    configs = intakes(settings)
    if not configs:
        raise click.ClickException("no [intake.github] in the config: nothing is taken in")
    engine = app.engine(settings)
    for config in configs:
        key = f"{config.tracker}:{config.repo}"
        got = tracker_for(settings, config).open_issues(config.label, None)
        if isinstance(got, Fault | Unchanged):
            raise click.ClickException(f"intake {key}: {getattr(got, 'reason', 'no answer')}")
        with read_tx(engine) as conn:
            known = store.known(conn, key) if inspect(conn).has_table("intake_issues") else {}
        for issue in got[0]:
            if issue.number not in known:
                click.echo(
                    f"would add {slug_of(issue)}: {title_of(issue)} "
                    f"(#{issue.number}, pipeline {config.pipeline})"
                )
