"""`metrics` and `prune`: commands for whoever runs the orchestrator
(registered by the CLI with one line each)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click


@click.command("metrics")
@click.option(
    "--textfile",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write here atomically (node_exporter's textfile collector) instead of stdout.",
)
@click.pass_obj
def metrics_command(app: Any, textfile: Path | None) -> None:
    """Print Prometheus metrics: tasks, attempts, ticks, approvals, hook deliveries."""
    metrics = app.project().metrics()
    if textfile is None:
        click.echo(metrics.text, nl=False)
        return
    metrics.write_textfile(textfile)


class Days(click.ParamType[float, Any]):
    """A finite number of days, 0 or more. click's FloatRange lets `nan` and
    `inf` through, and neither is an age."""

    name = "days"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            days = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of days", param, ctx)
        if not math.isfinite(days) or days < 0:
            self.fail(f"{value!r} is not a finite number of days, 0 or more", param, ctx)
        return days


@click.command("prune")
@click.option(
    "--older-than",
    "days",
    type=Days(),
    metavar="DAYS",
    help="Tasks complete or cancelled at least this many days ago.",
)
@click.option(
    "--finished",
    is_flag=True,
    help="Also remove the worktrees of finished branch tasks (their branches stay).",
)
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
@click.pass_obj
def prune_command(app: Any, days: float | None, finished: bool, dry_run: bool) -> None:
    """Remove the state_root folders (captured output) of tasks finished long ago.

    Only the attempt folders and setup marker the tick wrote; never anything
    else in workspace_root. With --finished, the worktrees of complete or
    cancelled branch tasks go too (all of them, or those finished --older-than
    DAYS ago); each branch stays. Database rows are never touched: history,
    scores and transitions stay."""
    from orchestrator.api.prune import size_text
    from orchestrator.api.results import RemovedWorktree

    if days is None and not finished:
        raise click.UsageError("say --older-than DAYS, --finished, or both")
    settings = app.settings(require_config=True)
    verb = "would remove" if dry_run else "removed"

    def said(item: RemovedWorktree) -> None:
        # Printed as each is done: the folders that follow may still fail.
        if item.error:
            click.echo(f"kept worktree {item.workspace}: {item.error}", err=True)
        else:
            click.echo(f"{verb} worktree {item.workspace} (branch {item.branch} stays)")

    result = app.project().prune(
        older_than=days, finished=finished, dry_run=dry_run, on_worktree=said
    )
    if days is None:
        return
    for path in result.kept:
        click.echo(f"kept {path} (it overlaps workspace_root {settings.workspace_root})")
    for folder in result.folders:
        click.echo(f"{verb} {folder.path} ({size_text(folder.size)})")
    click.echo(
        f"{'would free' if dry_run else 'freed'} {size_text(result.freed)} "
        f"in {len(result.folders)} folder{'' if len(result.folders) == 1 else 's'}"
    )
