"""`add`, `list`, `show`, `halt`, `resume`, `cancel`: one task at a time."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from orchestrator.cli.app import App, human_only, pass_app
from orchestrator.cli.gates import human_command
from orchestrator.cli.output import (
    emit_json,
    emit_rows,
    format_options,
    printable,
    short_time,
    shown_path,
    table,
)
from orchestrator.errors import RefusedError

# What an attempt's folder may hold, in the order `show` names them.
ATTEMPT_FILES = (
    "worker.out",
    "worker.err",
    "verifier.out",
    "verifier.err",
    "prompt.md",
    "context.json",
)

if TYPE_CHECKING:
    from orchestrator.api.adding import TaskSpec
    from orchestrator.api.types import TaskView


class Dollars(click.ParamType[float, Any]):
    """A positive, finite amount of US dollars. click's FloatRange lets
    `nan` and `inf` through: a NaN budget is never reached (`spent >= nan`
    is false) and an infinite one prints as `Infinity`, which is not JSON."""

    name = "usd"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            amount = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of US dollars", param, ctx)
        if not math.isfinite(amount) or amount <= 0:
            self.fail(f"{value!r} is not a positive, finite number of US dollars", param, ctx)
        return amount


@click.command()
@click.argument("slug", required=False)
@click.option("--title", help="One line saying what the task is.")
@click.option(
    "--pipeline", default="default", show_default=True, help="Pipeline to run it through."
)
@click.option("--priority", type=int, default=0, show_default=True, help="Higher runs first.")
@click.option("--body", help="The full description handed to agents (prompt {body}).")
@click.option(
    "--body-file", type=click.Path(dir_okay=False, exists=True), help="Read the body from a file."
)
@click.option(
    "--from",
    "from_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Add tasks from JSON lines (slug, title, pipeline, priority, body, after) "
    "in one transaction.",
)
@click.option(
    "--budget",
    type=Dollars(),
    metavar="USD",
    help="The task's own budget: it halts as `budget` once its recorded cost reaches this.",
)
@click.option(
    "--after",
    metavar="SLUG[,SLUG]",
    help="Claim it only once these tasks are complete (exit 65 for an unknown one or a cycle).",
)
@pass_app
def add(
    app: App,
    slug: str | None,
    title: str | None,
    pipeline: str,
    priority: int,
    body: str | None,
    body_file: str | None,
    from_file: str | None,
    budget: float | None,
    after: str | None,
) -> None:
    """Add a task at the first stage of its pipeline.

    SLUG names the task and its workspace folder: 1-63 characters of a-z 0-9 . _ -.
    """
    from orchestrator.api.adding import TaskSpec

    if from_file is not None:
        if slug or title:
            raise click.UsageError("--from cannot be combined with SLUG or --title")
        specs = read_specs(from_file)
        if budget is not None:
            specs = [dataclasses.replace(spec, max_cost_usd=budget) for spec in specs]
        if after is not None:
            raise click.UsageError("--after with --from: give each line its own `after`")
    else:
        if slug is None or title is None:
            raise click.UsageError("give SLUG and --title (or --from FILE)")
        if body is not None and body_file is not None:
            raise click.UsageError("give --body or --body-file, not both")
        if body_file is not None:
            body = Path(body_file).read_text(encoding="utf-8", errors="replace")
        from orchestrator.domain.waits import parse_after

        waits = parse_after(after or "")
        specs = [TaskSpec(slug, title, pipeline, priority, body or "", budget, waits)]
    project = app.project()
    count = project.add_many(specs)
    names = ", ".join(spec.slug for spec in specs[:20])
    more = f" and {count - 20} more" if count > 20 else ""
    click.echo(f"added {specs[0].slug}" if count == 1 else f"added {count} tasks: {names}{more}")
    root = project.settings.workspace_root
    for spec in specs:
        if isinstance(spec.slug, str) and (root / spec.slug).exists():
            click.echo(
                f"note: {spec.slug}: workspace {shown_path(root / spec.slug)}"
                " exists and is reused as it is (a pipeline's setup will not run)",
                err=True,
            )


def read_specs(source: str) -> list[TaskSpec]:
    """The tasks of a JSON-lines file (`-`: stdin), refusing the first bad line."""
    from orchestrator.api.adding import TaskSpec
    from orchestrator.domain.slug import slug_problem

    stream = sys.stdin if source == "-" else None
    try:
        text = stream.read() if stream else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise RefusedError(f"cannot read {source}: {exc.strerror}") from exc
    specs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if not isinstance(item, dict):
                raise TypeError("not an object")
            unknown = set(item) - {"slug", "title", "pipeline", "priority", "body", "after"}
            if unknown:
                raise TypeError(f"unknown field {sorted(unknown)[0]!r}")
            problem = slug_problem(item["slug"]) if isinstance(item.get("slug"), str) else None
            if problem is not None:
                raise ValueError(f"slug {item['slug']!r}: {problem}")
            specs.append(
                TaskSpec(
                    slug=item["slug"],
                    title=item["title"],
                    pipeline=item.get("pipeline", "default"),
                    priority=item.get("priority", 0),
                    body=item.get("body", ""),
                    after=_after_field(item.get("after", [])),
                )
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise RefusedError(f"{source} line {number}: {exc}") from None
        if not all(isinstance(v, str) for v in (item["slug"], item["title"], item.get("body", ""))):
            raise RefusedError(f"{source} line {number}: slug, title and body must be strings")
    if not specs:
        raise RefusedError(f"{source} holds no tasks")
    return specs


def _after_field(value: Any) -> tuple[str, ...]:
    """A line's `after`: a list of slugs, or one string as `--after` takes it."""
    from orchestrator.domain.waits import parse_after

    if isinstance(value, str):
        return parse_after(value)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError("after must be a list of task slugs")
    return parse_after(",".join(value))


@click.command("list")
@click.option(
    "--state",
    help="Only tasks in this state (`implement`, `research:halted`) or status (`halted`).",
)
@format_options(csv_ok=True)
@pass_app
def list_(app: App, state: str | None, fmt: str | None) -> None:
    """List tasks with their state, attempts at this stage and last score."""
    rows = [row.to_dict() for row in app.project().tasks(state)]
    if fmt == "json":
        emit_json(rows)
        return
    columns = ["slug", "state", "attempt", "score", "cost_usd", "halt_reason", "title"]
    emit_rows(columns, [[r[c] for c in columns] for r in rows], fmt or "table")
    if (fmt or "table") == "table" and app.settings().pools:
        from orchestrator.features.pools.views import pool_line

        for pool in app.project().pools():  # a paused pool holds its tasks back
            if pool.paused:
                click.echo(f"pool {pool_line(pool.to_dict())}")


@click.command()
@click.argument("slug")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the task, its transitions and attempts as JSON."
)
@pass_app
def show(app: App, slug: str, as_json: bool) -> None:
    """Show one task: its state, transitions and attempts, oldest first."""
    from orchestrator.features.candidates.views import slot_label

    view = app.project().task(slug)
    if as_json:
        emit_json(view.to_dict())
        return
    click.echo(f"{view.slug}: {printable(view.title)}")
    click.echo(f"  state     {view.state}" + (f" ({view.halt_reason})" if view.halt_reason else ""))
    click.echo(f"  pipeline  {view.pipeline}   priority {view.priority}")
    if view.after:
        waits = ", ".join(f"{w.slug} ({w.state})" for w in view.after)
        click.echo(f"  after     {printable(waits)}")
    if view.parent:
        click.echo(f"  parent    {view.parent}")
    if view.subtasks:
        click.echo(f"  subtasks  {', '.join(view.subtasks)}")
    if view.change:
        from orchestrator.views.branch import BranchState

        change: dict[str, Any] = dict(view.change)
        state = BranchState(**{**change, "workspace": Path(change["workspace"])})
        for line in state.lines():
            click.echo(f"  {printable(line)}")
    from orchestrator.views.sparkline import marks, score_lines

    attempts: list[dict[str, Any]] = [dict(a) for a in view.attempts]
    for index, line in enumerate(score_lines(attempts)):
        click.echo(f"{'  scores   ' if index == 0 else ' ' * 11} {line}")
    from orchestrator.agents.report import cost_line

    click.echo(f"  cost      {cost_line(view.cost_usd, view.budget)}")
    if view.next_hint:
        click.echo(f"  next hint {printable(view.next_hint[:200])}")
    gate = view.gate
    for part, title in (
        (None if gate is None else gate.whole, "whole change"),
        (None if gate is None else gate.stage, "this stage"),
    ):
        if part is not None:
            count = len(part.files)
            files = "1 file" if count == 1 else f"{count} files"
            click.echo(f"  {title:<13} {files} since {part.base[:12]}")
            for status, path in part.files:
                click.echo(f"                {status} {printable(path)}")
    if view.approval_hash:
        click.echo(f"  approval  {view.approval_hash}   (approve --expect it)")
    if view.answer:
        click.echo("\nanswer (the agent's final message, out of its raw output):")
        for line in _wrapped(view.answer, shutil.get_terminal_size().columns - 4):
            click.echo(f"    {line}".rstrip())
    click.echo("\ntransitions:")
    click.echo(table(["seq", "at", "from", "to", "actor", "reason / note"], _transitions(view)))
    if attempts:
        click.echo("\nattempts:")
        click.echo(
            table(
                ["stage", "n", "outcome", "pass", "score", "mark", "cost_usd", "error / next hint"],
                [
                    [
                        a["stage"],
                        f"{a['number']} ({slot_label(a)})" if a.get("round") else a["number"],
                        a["outcome"] or "running",
                        a["pass"],
                        a["score"],
                        marks(a),
                        a["cost_usd"],
                        a["error"] or a["next_hint"],
                    ]
                    for a in attempts
                ],
            )
        )
        last = attempts[-1]
        folder = Path(last["state_dir"])
        # Only the files that are there: a stream that printed nothing may have
        # left no file, and a path that is not there sends a reader hunting.
        written = [name for name in ATTEMPT_FILES if (folder / name).is_file()]
        click.echo(
            f"\noutput of attempt {last['stage']} {last['number']}: {shown_path(folder)}/ "
            f"({', '.join(written) or 'no files'}; the other attempts' folders are beside it)"
        )


def _wrapped(text: str, width: int) -> list[str]:
    """`text` as terminal lines no wider than `width` (at least 40): a long
    line is broken, not cut at the right edge; short lines and blank lines
    stay as the agent wrote them."""
    width = max(40, width)
    lines: list[str] = []
    for line in text.splitlines():
        lines.extend(textwrap.wrap(printable(line), width, break_on_hyphens=False) or [""])
    return lines


def _transitions(view: TaskView) -> list[list[Any]]:
    return [
        [
            t.seq,
            short_time(t.at),
            t.from_state,
            t.to_state,
            t.actor,
            _reason_and_note(t.reason, t.note),
        ]
        for t in view.transitions
    ]


def _reason_and_note(reason: str | None, note: str | None) -> str:
    """A person's note is what a reader looks for; the tick's reason alone hid it."""
    if reason and note:
        return f"{reason}; note: {note}"
    return reason or (f"note: {note}" if note else "")


halt = human_command(
    "halt",
    """Stop SLUG where it is (halt_reason manual); a running attempt stops within seconds.""",
)


@click.command()
@click.argument("slug")
@click.option("--by", metavar="NAME", help="Who is acting (default: the login name).")
@click.option("--note", help="Why; stored on the transition.")
@click.option(
    "--budget",
    type=Dollars(),
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
    human_only()
    click.echo(app.project().resume(slug, note=note, by=by, budget=budget).message)


cancel = human_command(
    "cancel",
    """End SLUG for good (terminal); a running attempt stops within seconds.""",
)


@click.command()
@click.argument("slug")
@click.option("--stage", metavar="STAGE", help="Only this stage's part (its latest run).")
@click.option("--stat", is_flag=True, help="A summary per file instead of the diff.")
@pass_app
def diff(app: App, slug: str, stage: str | None, stat: bool) -> None:
    """Show a branch task's change against its base commit.

    The whole change: what the stages committed, what the worktree holds
    uncommitted, and new untracked files (ignored files stay out), as
    `git diff` prints it. --stage shows one stage's part.
    """
    click.echo(app.project().diff(slug, stage, stat), nl=False)
