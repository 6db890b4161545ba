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
    from orchestrator.views.metrics import render_metrics, write_textfile

    settings = app.settings()
    engine = app.engine(settings)
    if textfile is None:
        click.echo(render_metrics(engine).decode(), nl=False)
        return
    write_textfile(engine, textfile)


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
    from orchestrator.api.prune import prune, size_text

    if days is None and not finished:
        raise click.UsageError("say --older-than DAYS, --finished, or both")
    settings = app.settings(require_config=True)
    if finished:
        from orchestrator.api.worktrees import finished_worktrees

        gone = finished_worktrees(app.engine(settings), settings, days=days or 0.0, dry_run=dry_run)
        for item in gone:
            if item.error:
                click.echo(f"kept worktree {item.workspace}: {item.error}", err=True)
            else:
                verb = "would remove" if dry_run else "removed"
                click.echo(f"{verb} worktree {item.workspace} (branch {item.branch} stays)")
    if days is None:
        return
    result = prune(
        app.engine(settings),
        settings.state_root,
        days=days,
        dry_run=dry_run,
        workspace_root=settings.workspace_root,
    )
    verb = "would remove" if dry_run else "removed"
    for path in result.kept:
        click.echo(f"kept {path} (it overlaps workspace_root {settings.workspace_root})")
    for folder in result.folders:
        click.echo(f"{verb} {folder.path} ({size_text(folder.size)})")
    total = sum(folder.size for folder in result.folders)
    click.echo(
        f"{'would free' if dry_run else 'freed'} {size_text(total)} "
        f"in {len(result.folders)} folder{'' if len(result.folders) == 1 else 's'}"
    )
