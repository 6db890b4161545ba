"""`approve` and `reject`, and the factory every human decision is made with.

A human command takes SLUG, `--by` and `--note`, refuses to run inside an
attempt, calls the `Project` method of its name and prints its message.
"""

from __future__ import annotations

from typing import Any

import click

from orchestrator.cli.app import App, human_only, pass_app


def human_command(name: str, doc: str, note_required: bool = False) -> click.Command:
    """The command `name`, which calls `Project.<name>` (imported when it
    runs: the library imports SQLAlchemy)."""

    @click.argument("slug")
    @click.option("--by", metavar="NAME", help="Who is acting (default: the login name).")
    @click.option("--note", required=note_required, help="Why; stored on the transition.")
    @pass_app
    def command(app: App, /, slug: str, by: str | None, note: str | None, **more: Any) -> None:
        human_only()
        # approve's `--expect` binds the approval to what the reviewer saw;
        # reject's `--to` sends the task back to an earlier stage.
        extra = {key: more[key] for key in ("expect", "to") if more.get(key)}
        result = getattr(app.project(), name)(slug, note=note, by=by, **extra)
        click.echo(result.message)

    command.__doc__ = doc
    if name == "approve":
        command = click.option(
            "--expect",
            metavar="HASH",
            help="Approve only if the gate still has this approval hash (from `show`).",
        )(command)
        # Not an option: a person who reaches for it is told what approve
        # opens, where click would offer "Did you mean '--note'?".
        command = click.option(
            "--stage",
            hidden=True,
            expose_value=False,
            callback=_no_stage,
            help="Not an option: approve opens the gate the task waits at.",
        )(command)
    if name == "reject":
        command = click.option(
            "--to",
            metavar="STAGE",
            help="Run this earlier stage of the task's pipeline next, not the gate's own.",
        )(command)
    return click.command(name)(command)


def _no_stage(_ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        raise click.UsageError(
            "approve takes no --stage: it opens the gate SLUG waits at (`orchestrator "
            "list` shows STAGE:awaiting_approval); to run another stage next, "
            "`orchestrator reject SLUG --to STAGE --note ...`"
        )


approve = human_command(
    "approve",
    """Open a gate: SLUG moves from STAGE:awaiting_approval to STAGE:approved.

    The next tick moves it to the next stage. Approving again is harmless.
    """,
)
reject = human_command(
    "reject",
    """Send a gate back: SLUG runs its stage again with --note as the hint.

    With --to STAGE, that earlier stage of the pipeline runs next instead
    (a review's flaw is fixed where the work is done). The note reaches the
    next attempt as ORCHESTRATOR_NEXT_HINT and {hint}.
    """,
    note_required=True,
)
