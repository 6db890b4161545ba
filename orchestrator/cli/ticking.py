"""`tick` and `run`: the lock, the signals, and one log line per tick.

Nothing here imports SQLAlchemy until the host's tick lock is ours: a tick
that finds it busy exits 75 in a fraction of a normal tick's time. What a
tick's exit status is, is decided by `orchestrator.api.ticking`.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from orchestrator.cli.app import App, pass_app
from orchestrator.cli.output import now
from orchestrator.config import Settings, load_settings
from orchestrator.errors import ConnectionLostError, LockBusyError, TickFailedError

if TYPE_CHECKING:
    from orchestrator.api.ticking import TickResult


def _tick_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--max-tasks", type=click.IntRange(min=1), help="Claim at most N attempts."),
        click.option(
            "--max-seconds",
            type=click.FloatRange(min=0),
            help="Stop claiming after S seconds (running attempts finish).",
        ),
        click.option(
            "--jobs",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            help="Attempts to run side by side.",
        ),
        click.option(
            "--task",
            "only",
            metavar="SLUG",
            help="Claim only this task (recovery still covers all).",
        ),
        click.option(
            "-q",
            "--quiet",
            is_flag=True,
            help="For cron: nothing for a busy lock or an idle tick; else one "
            "timestamped line per attempt result or state change.",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@contextmanager
def _signals_to(stop: threading.Event) -> Iterator[list[int]]:
    """SIGTERM/SIGINT set `stop` instead of killing us mid-write: the running
    attempts then stop their process groups and are recorded `interrupted`."""
    received: list[int] = []

    def handler(signum: int, _frame: Any) -> None:
        received.append(signum)
        stop.set()

    previous = {}
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, handler)
    try:
        yield received
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _run_one_tick(
    app: App,
    settings: Settings,
    stop: threading.Event,
    received: list[int],
    options: dict[str, Any],
    *,
    quiet: bool,
    stop_is_clean: bool = False,
) -> None:
    """One tick under the lock, with `options` for `TickOptions` (built here:
    the library imports SQLAlchemy, which the busy-lock path must not). Raises
    the error of the tick's exit status after printing its summary."""
    from orchestrator.api.ticking import TickOptions, run_tick

    # Quiet (cron) still logs what happened, one stamped line per attempt
    # result, state change or recovery; a tick that did nothing says nothing.
    say: Callable[[str], None] = (
        (lambda line: click.echo(f"{now()} {line}")) if quiet else click.echo
    )

    def warn(line: str) -> None:  # errors the tick survived: stderr, quiet or not
        click.echo(f"{now() + ' ' if quiet else ''}Error: {line}", err=True)

    # One engine per tick, disposed at its end: `run` ticks for days, and a
    # pool per tick left open would hold PostgreSQL connections until it dies.
    engine = app.engine(settings, owned=True, jobs=options.get("jobs", 1))
    try:
        from orchestrator.tick.progress import live_progress

        # One live line per running attempt on a terminal; cron's output stays plain.
        with live_progress(enabled=not quiet and not options.get("dry_run")) as progress:
            result = run_tick(
                settings,
                engine,
                TickOptions(**options),
                stop=stop,
                say=progress.say(say),
                warn=warn,
                signals=received,
                stop_is_clean=stop_is_clean,
                progress=progress,
            )
    finally:
        engine.dispose()
    if result.signal is None and result.did_work and not quiet:
        click.echo(_summary(result))
    result.raise_for_status()


def _summary(result: TickResult) -> str:
    outcomes = ", ".join(f"{n} {k}" for k, n in sorted(result.outcomes.items()))
    return (
        f"tick: {result.claimed} attempts"
        + (f" ({outcomes})" if outcomes else "")
        + f", {result.advanced} advanced, {result.recovered} recovered, {result.halted} halted"
        + (f"; stopped claiming: {result.stopped_claiming}" if result.stopped_claiming else "")
    )


@click.command()
@_tick_options
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=0,
    help="Wait up to S seconds for the lock instead of exiting 75.",
)
@click.option(
    "--dry-run", is_flag=True, help="Print what each task would do and why; write nothing."
)
@pass_app
def tick(
    app: App,
    max_tasks: int | None,
    max_seconds: float | None,
    jobs: int,
    only: str | None,
    quiet: bool,
    wait: float,
    dry_run: bool,
) -> None:
    """Advance every task one step: recover, move approved gates on, run attempts.

    Run it from cron. A tick that finds another holding the host lock exits 75
    at once (silently with --quiet); SIGTERM/SIGINT stop the running attempts,
    record them `interrupted` and exit 143/130.
    """
    from orchestrator.locking import TickLock

    app.stamped = quiet
    settings = app.settings(require_config=True)
    lock = TickLock(settings.lock_file)
    try:
        lock.acquire(wait)
    except LockBusyError:
        if quiet:
            sys.exit(75)
        raise
    stop = threading.Event()
    try:
        _remember_for_idle_ticks(app, settings)
        with _signals_to(stop) as received:
            options: dict[str, Any] = {"max_tasks": max_tasks, "max_seconds": max_seconds}
            options.update(jobs=jobs, task=only, dry_run=dry_run)
            _run_one_tick(app, settings, stop, received, options, quiet=quiet)
    finally:
        lock.release()


def _remember_for_idle_ticks(app: App, settings: Settings) -> None:
    """What this tick read of its config, for the next idle one to trust
    without reading it again (`orchestrator.tick.idle`)."""
    from orchestrator.storage.db import sqlite_path
    from orchestrator.tick.idle import marker

    database = sqlite_path(settings.database_url)
    marker.remember(
        config=settings.config_path,
        fingerprint=settings.fingerprint,
        database=None if database is None else str(database),
        lock_file=settings.lock_file,
        state_root=settings.state_root,
        busy_timeout=settings.busy_timeout,
        hooks=bool(settings.hooks),
        sweep=any(p.keep_worktree_days is not None for p in settings.pipelines.values()),
        env_file=settings.env_file,
        best=any(s.on_halt == "best" for p in settings.pipelines.values() for s in p.stages),
        db_given=app.db,
        database_url=settings.database_url,
    )


@click.command()
@_tick_options
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=60,
    show_default=True,
    help="Seconds between ticks.",
)
@pass_app
def run(
    app: App,
    max_tasks: int | None,
    max_seconds: float | None,
    jobs: int,
    only: str | None,
    quiet: bool,
    interval: float,
) -> None:
    """Tick forever, every --interval seconds (a foreground alternative to cron).

    Between ticks, an approval, rejection, `add` or `resume` wakes it at once.

    Takes the same host lock for each tick, so cron ticks and `run` never
    overlap. SIGTERM (or SIGINT) while no attempt runs exits 0; while
    attempts run it stops them like `tick` does and exits 143 (130).
    """
    from orchestrator.locking import TickLock

    app.stamped = quiet
    stop = threading.Event()
    options: dict[str, Any] = {"max_tasks": max_tasks, "max_seconds": max_seconds}
    options.update(jobs=jobs, task=only)
    from orchestrator.tick.wake import Wake

    # Between ticks: the interval, or less when a person makes work claimable.
    wake = Wake(warn=lambda line: None if quiet else click.echo(line, err=True))
    with _signals_to(stop) as received:
        try:
            while not stop.is_set():
                settings = load_settings(config=app.config, db_url=app.db, require_config=True)
                wake.follow(settings.database_url)
                wake.arm()
                lock = TickLock(settings.lock_file)
                try:
                    lock.acquire()
                except LockBusyError as busy:
                    if not quiet:
                        click.echo(f"run: {busy}; skipping this round", err=True)
                    wake.arm()  # what is claimable now is the holder's: wait for more
                else:
                    try:
                        _run_one_tick(
                            app, settings, stop, received, options, quiet=quiet, stop_is_clean=True
                        )
                    except TickFailedError:
                        pass  # each error is on stderr already; the next tick goes on
                    except ConnectionLostError as lost:
                        # The database is down past the tick's reconnect bound: a
                        # daemon waits it out, tick after tick, rather than die.
                        click.echo(f"Error: {lost}", err=True)
                    finally:
                        lock.release()
                wake.settled()
                wake.wait(stop, interval)
        finally:
            wake.close()
