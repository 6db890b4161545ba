"""`orchestrator verifiers`: how far each gate's verifier agrees with people.

The feature sits below the CLI's layer, so the command reaches the root
group's `App` (its settings and database) through the click context,
typed by the little it uses, never by importing `orchestrator.cli`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

import click

from orchestrator.features.evidence.errors import UsageError

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from orchestrator.config import Settings


class _App(Protocol):
    def settings(self, *, require_config: bool = False) -> Settings: ...

    def engine(self, settings: Settings | None = None) -> Engine: ...


def parse_since(text: str | None) -> datetime | None:
    """`--since`: an ISO date or date-time; a naive one is UTC."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"--since {text!r}: not a date (write 2026-01-31 or 2026-01-31T12:00)"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


@click.command("verifiers")
@click.option("--pipeline", metavar="P", help="Only this pipeline's stages.")
@click.option("--stage", metavar="S", help="Only this stage.")
@click.option("--since", metavar="DATE", help="Only decisions made at or after DATE (UTC).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.pass_context
def verifiers(
    ctx: click.Context, pipeline: str | None, stage: str | None, since: str | None, as_json: bool
) -> None:
    """Per gated stage and verifier, over the verdicts people decided: how
    often pass agreed with approve, pass's precision and recall, the ROC AUC
    of the score against approve with its 95% interval (at_chance when it
    holds 0.5), the best score threshold, and what happened later."""
    from orchestrator.features.evidence.report import text_lines, verifiers_report

    app: _App = ctx.obj
    settings = app.settings()
    reports = verifiers_report(
        settings, app.engine(settings), pipeline=pipeline, stage=stage, since=parse_since(since)
    )
    if as_json:
        click.echo(json.dumps(reports, indent=2))
        return
    if not reports:
        click.echo(_nothing(pipeline, stage, since))
        return
    for index, report in enumerate(reports):
        if index:
            click.echo("")
        for line in text_lines(report):
            click.echo(line)


def _nothing(pipeline: str | None, stage: str | None, since: str | None) -> str:
    where = " ".join(
        part
        for part in (
            f"pipeline {pipeline}" if pipeline else "",
            f"stage {stage}" if stage else "",
            f"since {since}" if since else "",
        )
        if part
    )
    at = f" at {where}" if where else ""
    return f"no decisions yet{at}: nobody approved or rejected a verdict there"


@click.command("simulate")
@click.option("--pipeline", metavar="P", help="Only this pipeline's runs.")
@click.option("--stage", metavar="S", help="Only this stage's runs.")
@click.option(
    "--patience", required=True, metavar="N", help="Patience to replay: N, A..B or N,M (each >= 1)."
)
@click.option(
    "--min-delta", "min_delta", required=True, metavar="X", help="min_delta to replay: X or X,Y,Z."
)
@click.option("--json", "as_json", is_flag=True, help="Print the replay as JSON.")
@click.pass_context
def simulate(
    ctx: click.Context,
    pipeline: str | None,
    stage: str | None,
    patience: str,
    min_delta: str,
    as_json: bool,
) -> None:
    """Replay the recorded score histories under another plateau rule: the
    attempts and dollars it would have saved, the runs it would have halted
    earlier and the best score they reached later. A grid of rules prints a
    table and suggests the cheapest that loses no best score."""
    from orchestrator.features.evidence import simulation

    patiences = simulation.parse_patience(patience)
    deltas = simulation.parse_min_delta(min_delta)
    app: _App = ctx.obj
    settings = app.settings()
    result = simulation.simulate(
        app.engine(settings), patience=patiences, min_delta=deltas, pipeline=pipeline, stage=stage
    )
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    for line in simulation.text_lines(result):
        click.echo(line)
