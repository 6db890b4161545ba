"""`restore` and `calibrate`: an attempt's kept work back on the branch, and
a verifier's noise measured."""

from __future__ import annotations

import click

from orchestrator.cli.app import App, human_only, pass_app
from orchestrator.cli.output import emit_json

MAX_CALIBRATE_SAMPLES = 1000


@click.command()
@click.argument("slug")
@click.option(
    "--attempt", "number", type=click.IntRange(min=1), required=True, help="The attempt's number."
)
@click.option("--stage", help="The attempt's stage (default: the task's stage).")
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@pass_app
def restore(app: App, slug: str, number: int, stage: str | None, as_json: bool) -> None:
    """Put attempt NUMBER's kept work back on SLUG's branch.

    A new commit on the task's branch holds exactly that attempt's files
    (its `refs/orchestrator/` snapshot), checked out in the worktree; what
    the worktree held before is kept as `refs/orchestrator/SLUG/_before-restore`.
    Refused (1) while the task is running, ready or landing, or when the attempt or
    its ref is not there."""
    human_only()
    done = app.project().restore(slug, number, stage=stage)
    if as_json:
        emit_json(done.to_dict())
        return
    if done.commit is None:
        click.echo(f"{slug}: the branch holds {done.stage} attempt {number}'s work already")
    else:
        click.echo(f"{slug}: {done.stage} attempt {number} restored as commit {done.commit[:12]}")


@click.command()
@click.argument("slug")
@click.option("--stage", required=True, help="The stage whose verifier is run.")
@click.option(
    "--samples",
    type=click.IntRange(min=2, max=MAX_CALIBRATE_SAMPLES),
    default=10,
    show_default=True,
    help="How many times to run it.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the spread as JSON.")
@pass_app
def calibrate(app: App, slug: str, stage: str, samples: int, as_json: bool) -> None:
    """Run STAGE's verifier on SLUG's workspace as it is, several times,
    recording nothing, and print the spread of its scores with a plateau
    `min_delta` to match (twice the standard deviation).

    Exits 65 when no run printed a verdict."""
    result = app.project().calibrate(slug, stage, samples)
    if as_json:
        emit_json(result.to_dict())
        return
    click.echo(
        f"{slug} {stage}: {result.samples} samples, mean {result.mean:.4f}, "
        f"stdev {result.stdev:.4f}, min {result.min:.4f}, max {result.max:.4f}"
    )
    if result.invalid:
        click.echo(f"{result.invalid} run(s) printed no verdict and are left out")
    click.echo(f"suggested plateau min_delta = {result.suggested_min_delta}")
