"""`resume`, with `--budget`: the command that lets a task halted as
`budget` go on. Registered by `orchestrator.cli` (it replaces the plain
human command of the same name)."""

from __future__ import annotations

import click

from orchestrator.cli import App, _actor, _human_only, pass_app


@click.command()
@click.argument("slug")
@click.option("--by", metavar="NAME", help="Who is acting (default: the login name).")
@click.option("--note", help="Why; stored on the transition.")
@click.option(
    "--budget",
    type=float,
    metavar="USD",
    help="Give the task its own budget (US dollars of recorded cost, all stages); "
    "it must be above what the task has spent.",
)
@pass_app
def resume(app: App, slug: str, by: str | None, note: str | None, budget: float | None) -> None:
    """Make a halted SLUG ready again at its stage, with a fresh plateau window.

    A task halted as `budget` needs --budget above what it has spent, or
    the next tick halts it again.
    """
    from orchestrator import actions

    _human_only()
    result = actions.resume(app.engine(), slug, _actor(by), note, budget=budget)
    click.echo(result.message)


def register(group: click.Group) -> None:
    """Called by `orchestrator.cli` once its own commands exist."""
    group.add_command(resume)
