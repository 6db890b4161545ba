"""`orchestrator migrate`, a verb of the versions feature (`Feature.commands`).

The root group's object (the CLI's `App`) is reached through click's
context by what it offers, `settings()` and `engine()`: a feature does not
import the CLI."""

from __future__ import annotations

import getpass
import os
from typing import TYPE_CHECKING, Protocol, cast

import click

from orchestrator.domain.actor import actor_problem
from orchestrator.errors import RefusedError

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from orchestrator.config import Settings


class _App(Protocol):
    def settings(self) -> Settings: ...

    def engine(self, settings: Settings | None = None) -> Engine: ...


def _app() -> _App:
    return cast(_App, click.get_current_context().find_root().obj)


def _actor(by: str | None) -> str:
    if by:
        if (problem := actor_problem(by)) is not None:
            raise RefusedError(f"--by {by[:40]!a}: the name {problem}")
        return by
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid:{os.getuid()}"


@click.command("migrate")
@click.argument("slugs", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Every unfinished task (see --pipeline).")
@click.option("--pipeline", metavar="P", help="With --all: only the tasks of pipeline P.")
@click.option("--from", "since", metavar="VERSION", help="With --all: only tasks on VERSION.")
@click.option("--to", "to", required=True, metavar="current|VERSION", help="The target version.")
@click.option("--map", "maps", multiple=True, metavar="OLD=NEW", help="Stage OLD becomes NEW.")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="Move at most N tasks.")
@click.option("--by", metavar="NAME", help="Who is acting (default: the login name).")
def migrate(
    slugs: tuple[str, ...],
    everything: bool,
    pipeline: str | None,
    since: str | None,
    to: str,
    maps: tuple[str, ...],
    dry_run: bool,
    limit: int | None,
    by: str | None,
) -> None:
    """Move tasks in flight to another version of their pipeline (`--to
    current`: this host's config), one transaction per task. A task whose
    stage the target lacks needs `--map STAGE=NEW`; a running one waits."""
    from orchestrator.features.versions import migrate as moving

    if bool(slugs) == everything:
        raise click.UsageError("name tasks (SLUG...) or give --all, not both")
    if (pipeline or since) and not everything:
        raise click.UsageError("--pipeline and --from select with --all only")
    try:
        mapping = moving.parse_maps(maps)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    if os.environ.get("ORCHESTRATOR_TASK"):
        raise RefusedError("refusing a human command from inside an attempt")
    actor = _actor(by)
    app = _app()
    settings = app.settings()
    engine = app.engine(settings)
    from orchestrator.storage.db import read_tx, write_tx

    with read_tx(engine) as conn:
        chosen = moving.selected(conn, slugs, pipeline=pipeline, since=since)
        plan = moving.plan(conn, settings, chosen, to, mapping, everything=everything)
    refused = [m for m in plan if m.refused is not None]
    moves = [m for m in plan if m.refused is None][:limit]
    for move in refused:
        click.echo(move.line(), err=True)
    if not plan:
        click.echo("nothing to migrate: every selected task is on the target version")
        return
    for move in moves:
        if dry_run:
            click.echo(f"would move {move.line()}")
            continue
        with write_tx(engine) as conn:
            done = moving.apply(conn, move, actor=actor, maps=mapping)
        if done:
            click.echo(f"moved {move.line()}")
        else:
            refused.append(move)
            said = f"{move.slug}: refused: it changed since the plan; run migrate again"
            click.echo(said, err=True)
        moving.between_tasks()
    if refused:
        raise RefusedError(f"{len(refused)} task(s) not moved (see above)")
