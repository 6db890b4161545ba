"""Getting started: `init`, `demo`, `doctor`, `cron`."""

from __future__ import annotations

import os
from pathlib import Path

import click

from orchestrator.agents import kinds
from orchestrator.cli.app import App, pass_app
from orchestrator.cli.output import shown_path, shown_url, table
from orchestrator.errors import RefusedError


@click.command()
@click.option(
    "--force",
    is_flag=True,
    help="Replace an existing orchestrator.toml, saved as .bak (prompts and judges are kept).",
)
@click.option(
    "--agent",
    type=click.Choice(kinds.NAMES),
    help="Write the recipe whose every stage runs this agent (examples/AGENT in the source).",
)
@click.option(
    "--repository",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="PATH",
    help="The git repository tasks change: each task becomes a branch of it.",
)
@click.option(
    "--land",
    type=click.Choice(["merge", "pr"]),
    help="With --repository: land each finished task (merge queue, or a pull request).",
)
@click.option(
    "--mcp",
    is_flag=True,
    help="With --agent claude: register `orchestrator mcp` (mcp.json) so agents add subtasks.",
)
@click.option(
    "--sandbox",
    is_flag=True,
    help="Run the recipe's commands inside bubblewrap, the agent's folders mapped (needs --agent).",
)
@pass_app
def init(
    app: App,
    force: bool,
    agent: str | None,
    repository: Path | None,
    land: str | None,
    mcp: bool,
    sandbox: bool,
) -> None:
    """Start a project: config, prompts, judges, database.

    Writes orchestrator.toml (or the --config path) with the default pipeline
    research [gate] -> implement -> code_review [gate] -> bug_find ->
    adversarial_bug_find -> doc_review -> referee, whose stages are recipes to
    edit (`claude -p`, `codex exec -`, a pytest judge in judges/), prompt
    templates in prompts/, then creates the database (--db, ORCHESTRATOR_DB_URL
    or the config's). With --repository, each task is a branch task/<slug> of
    that repository, in a worktree of its own; with --land merge too, a task
    whose last stage passed is rebased, checked and landed on its base branch.
    With --sandbox (and --agent), every command runs inside bubblewrap with the
    agent CLI's folders mapped. Refuses (exit 1) to overwrite a config without
    --force, a --repository that is not a git repository, or --land without
    --repository.
    """
    from orchestrator.scaffold import init_project

    path = Path(app.config) if app.config else Path.cwd() / "orchestrator.toml"
    result = init_project(
        path,
        force=force,
        db_url=app.db,
        agent=agent,
        repository=repository,
        land=land,
        mcp=mcp,
        sandbox=sandbox,
    )
    for written in result.written:
        click.echo(f"wrote {shown_path(written)}")
    for kept in result.kept:
        click.echo(f"kept  {shown_path(kept)} (exists)")
    if result.backup is not None:
        click.echo(f"saved {shown_path(result.backup)} (the config --force replaced)")
    change = "created" if result.revision_before is None else f"was {result.revision_before}"
    click.echo(
        f"database at {result.revision} ({change}): {shown_url(result.settings.database_url)}"
    )
    click.echo(
        "next: edit the stage commands and prompts, then run `orchestrator doctor`,\n"
        "      `orchestrator add my-task --title '...' --body-file spec.md`,\n"
        "      and `orchestrator cron --install` to tick it from your crontab."
    )


@click.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default="orchestrator-demo",
    show_default=True,
    help="Folder to build the demo project in (created if missing).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Use a non-empty --dir anyway, replacing only the demo's own files in it.",
)
def demo(directory: Path, force: bool) -> None:
    """Watch a simulated project run (no network, no keys).

    Builds a project in --dir whose stages run a simulated agent and verifier,
    adds four tasks and ticks until they settle, printing each step as the
    command a person would type: a gate approved, a gate rejected with a note
    that reaches the agent, a task halted as score_plateau, tasks reaching
    complete; then the status table and SQL on the score_history and timeline
    views. Ignores --config and --db: the demo has its own database.
    """
    from orchestrator.scaffold import run_demo

    run_demo(directory, force=force, say=click.echo, table=table)


@click.command()
@pass_app
def doctor(app: App) -> None:
    """Check config, database, lock, commands and prompts.

    Prints one line per check (ok, warn or fail) with its detail. Exits 0 when
    no check failed (warnings allowed), 1 when one failed, 78 when the config
    cannot be loaded. Changes nothing; it takes the tick lock for an instant
    to learn whether a tick holds it.
    """
    from orchestrator.doctor import run_doctor

    report = run_doctor(app.config, app.db)
    for check in report.checks:
        click.echo(f"{check.level.value:<5} {check.name:<10} {check.detail}")
    failed = sum(1 for c in report.checks if c.level.value == "fail")
    warned = sum(1 for c in report.checks if c.level.value == "warn")
    click.echo(f"{failed} failed, {warned} warnings")
    click.get_current_context().exit(report.exit_code)


@click.command()
@click.option(
    "--every",
    type=click.IntRange(min=1, max=1440),
    default=1,
    show_default=True,
    metavar="MINUTES",
    help="How often to tick: 1-59 minutes, or whole hours that divide a day (60, 120, ...).",
)
@click.option(
    "--install", is_flag=True, help="Put the line in your crontab (replacing this project's)."
)
@click.option("--uninstall", is_flag=True, help="Remove this project's line from your crontab.")
@click.option(
    "--force",
    is_flag=True,
    help="With --install: install even when a stage's command is not on the line's PATH.",
)
@pass_app
def cron(app: App, every: int, install: bool, uninstall: bool, force: bool) -> None:
    """Print a crontab line that ticks this project, or install it.

    The line uses absolute paths (this Python's orchestrator, --config), a
    copy of this shell's PATH, each absolute folder once (cron's own PATH
    rarely holds the agents; relative and empty entries are left out with a
    warning), `tick --quiet`, and appends its log to
    orchestrator.log beside the config. A stage's command that PATH does not
    find is warned about: run cron from a shell that finds your agents.
    --install edits your crontab: the line, marked with `# orchestrator-cron`
    and the config's path, is added once or replaced in place (refused while
    a command is not found, unless --force); --uninstall removes it. Other
    lines are never touched.
    """
    from orchestrator import scaffold
    from orchestrator.scaffold import cron_line
    from orchestrator.scaffold.cron import cron_path, dropped_entries, unstartable

    if install and uninstall:
        raise click.UsageError("give --install or --uninstall, not both")

    settings = app.settings(require_config=True)
    try:
        # --db (or ORCHESTRATOR_DB_URL) goes into the line, resolved: cron has
        # neither this shell's environment nor its working folder.
        db_url = settings.database_url if app.db else None
        path, dropped = cron_path(os.environ.get("PATH", "/usr/bin:/bin"))
        line = cron_line(settings, every, db_url, path)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--every") from None
    if dropped and not uninstall:
        click.echo(f"warning: {dropped_entries(dropped)}", err=True)
    missing = [] if uninstall else unstartable(settings, path)
    if missing and install and not force:
        raise RefusedError(_not_on_path(missing) + "; or give --force to install it anyway")
    if missing:
        click.echo(f"warning: {_not_on_path(missing)}", err=True)
    if not (install or uninstall):
        click.echo(line)
        click.echo("# install it: orchestrator cron --install", err=True)
        return
    assert settings.config_path is not None
    current = scaffold.read_crontab()
    text, change = scaffold.edit_crontab(
        current, line if install else None, settings.config_path, printed=line
    )
    if text != current:
        scaffold.write_crontab(text)
    click.echo(
        {
            "installed": "installed in your crontab:",
            "replaced": "replaced this project's line in your crontab:",
            "unchanged": "already in your crontab:",
            "removed": "removed this project's line from your crontab",
            "absent": "your crontab has no line for this project; nothing changed",
        }[change]
        + (f"\n{line}" if install else "")
    )


def _not_on_path(missing: list[tuple[str, str]]) -> str:
    """One line naming each program once, with the stages that run it."""
    by_program: dict[str, list[str]] = {}
    for where, program in missing:
        by_program.setdefault(program, []).append(where)
    named = "; ".join(
        f"{program!r} ({', '.join(wheres[:3])}{', …' if len(wheres) > 3 else ''})"
        for program, wheres in by_program.items()
    )
    return (
        f"not found on the PATH the line carries: {named}; a tick from cron cannot start "
        "it: run cron from a shell whose PATH finds it"
    )
