"""One tick as its caller sees it: what it did, and the exit status that says so.

The exit policy lives here, once, for `orchestrator tick`, `orchestrator run`,
the demo and `Project.tick`: a tick that survived errors exits with the first
one's status; a tick stopped by a signal records its end as 128 + the signal
and exits so, except that `run` treats a signal that stopped no attempt (it
came while the tick was idle) as the clean end of its loop.
"""

from __future__ import annotations

import dataclasses
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Engine

from orchestrator import compose
from orchestrator.config import Settings
from orchestrator.errors import Interrupted, TickFailedError
from orchestrator.events.outbox import with_hooks
from orchestrator.ext.model import TickOptions, TickReport
from orchestrator.storage.db import read_tx
from orchestrator.tick.progress import Progress
from orchestrator.views.suggest import require_task


@dataclass(frozen=True)
class TickResult:
    """What one tick did; `exit_status` is what `orchestrator tick` exits with."""

    claimed: int = 0
    advanced: int = 0
    recovered: int = 0
    halted: int = 0
    outcomes: Mapping[str, int] = field(default_factory=dict)
    stopped_claiming: str | None = None
    errors: tuple[str, ...] = ()
    exit_status: int = 0
    signal: int | None = None  # the signal that stopped the tick's attempts

    @classmethod
    def of(cls, report: TickReport, signal: int | None = None) -> TickResult:
        return cls(
            claimed=report.claimed,
            advanced=report.advanced,
            recovered=report.recovered,
            halted=report.halted,
            outcomes=dict(report.outcomes),
            stopped_claiming=report.stopped_claiming,
            errors=tuple(error.message for error in report.errors),
            exit_status=128 + signal if signal is not None else report.exit_code,
            signal=signal,
        )

    @property
    def did_work(self) -> bool:
        return bool(self.recovered or self.advanced or self.claimed or self.halted)

    def raise_for_status(self) -> None:
        """Raise the error whose exit status this tick calls for, if any.

        The errors themselves were reported as they happened (`warn`), so a
        failed tick's exception carries no message of its own."""
        if self.signal is not None:
            raise Interrupted(self.signal)
        if self.exit_status:
            raise TickFailedError("", self.exit_status)


def run_tick(
    settings: Settings,
    engine: Engine,
    options: TickOptions | None = None,
    *,
    stop: threading.Event | None = None,
    say: Callable[[str], None] = lambda line: None,
    warn: Callable[[str], None] = lambda line: None,
    signals: Sequence[int] = (),
    stop_is_clean: bool = False,
    progress: Progress | None = None,
) -> TickResult:
    """One tick; the caller holds this host's tick lock.

    `signals` is the list a signal handler appends to (and sets `stop`);
    with `stop_is_clean`, a signal that stopped no attempt is no error."""
    options = options or TickOptions()
    if settings.env_file is not None:  # read at each tick: an edit counts at the next one
        from orchestrator.config.envfile import read_env_file

        values = types.MappingProxyType(read_env_file(settings.env_file))
        settings = dataclasses.replace(settings, env_file_values=values)
    engine = with_hooks(engine, settings.hooks)  # its events go to the hooks at once
    if options.task is not None:
        # `tick --task fix-clac` must not be a silent tick that did nothing.
        with read_tx(engine) as conn:
            require_task(conn, options.task)
    ticker = compose.ticker(settings, engine, stop=stop, say=say, warn=warn, progress=progress)
    report = ticker.tick(options)
    if not options.dry_run and not signals:
        sweep_worktrees(settings, engine, warn)
    interrupted = report.outcomes.get("interrupted", 0) > 0
    if signals and (interrupted or not stop_is_clean):
        ticker.finish(128 + signals[0])
        return TickResult.of(report, signals[0])
    return TickResult.of(report)


def sweep_worktrees(settings: Settings, engine: Engine, warn: Callable[[str], None]) -> None:
    """`keep_worktree_days`: the worktrees of tasks finished that long ago
    go at the end of a tick (their branches stay). A pipeline without the
    key costs nothing here; a failure is a warning, never the tick's."""
    if not any(p.keep_worktree_days is not None for p in settings.pipelines.values()):
        return
    from orchestrator.api.worktrees import finished_worktrees

    try:
        for item in finished_worktrees(engine, settings):
            if item.error:
                warn(f"kept worktree {item.workspace}: {item.error}")
    except Exception as exc:  # the sweep is housekeeping; the tick's work is done
        warn(f"worktree sweep skipped: {exc}")


__all__ = ["TickOptions", "TickResult", "run_tick"]
