"""`on_halt = "best"`: a stage that halted on `score_plateau` or
`max_attempts` gets its run's best-scoring attempt's work back on the
task's branch (`restoring.restore_attempt`), once per halt.

A job of its own, run after the tick's attempts, rather than a step of
the record: the halt is committed first, and any tick after it (this one,
or the next after a kill) finds a halted task whose halt has no restore
yet and does it. "Done" is the mark on an attempt of the stage
(`attempts.restored_at`) at or after the halt (the task's `updated_at`,
which only a transition moves), so a person's own `restore` after the
halt is never undone by the job.
"""

from __future__ import annotations

from orchestrator.config import Settings
from orchestrator.ext.hooks import TickHooks
from orchestrator.ext.model import TickOptions
from orchestrator.ext.ports import HostPort, Kernel, RunPort, TxPort
from orchestrator.features.restore.restoring import restore_attempt
from orchestrator.storage import repo
from orchestrator.storage.db import read_tx
from orchestrator.storage.repo import restores


class BestRestorer:
    """Reads `tasks` and `attempts`; writes `attempts.restored_at` and the
    task's branch and worktree (through `restoring`). A restore that fails
    is a warning, tried again by the next tick; it fails no attempt."""

    def __init__(self, settings: Settings, tx: TxPort, tick: RunPort, me: HostPort) -> None:
        self.settings = settings
        self.tx = tx
        self.tick = tick
        self.me = me  # with `affinity = "host"`, only this host's tasks have their worktree here

    def restore_halted(self) -> None:
        if self.tick.stop.is_set() or self.tick.db_down.is_set():
            return
        # Retried like every read of the tick: a session the server ended
        # between the claims and this look is reconnected, not the tick's end.
        for task in self.tx.retrying(lambda _again: self._halted()):
            if self.tick.stop.is_set():
                return
            self._one(task)

    def _halted(self) -> list[repo.TaskSnapshot]:
        with read_tx(self.tx.engine) as conn:
            return restores.halted_for_best(conn)

    def _kept(self, task: repo.TaskSnapshot) -> list[restores.KeptAttempt]:
        with read_tx(self.tx.engine) as conn:
            return restores.stage_attempts(conn, task.id, task.stage)

    def _one(self, task: repo.TaskSnapshot) -> None:
        pipeline = self.settings.pipeline(task.pipeline)
        stage = None if pipeline is None else pipeline.stage(task.stage)
        if stage is None or stage.on_halt != "best" or pipeline is None:
            return
        if self.settings.affinity == "host" and task.host not in (None, self.me.host):
            return
        kept = self.tx.retrying(lambda _again: self._kept(task))
        if any(a.restored_at is not None and a.restored_at >= task.updated_at for a in kept):
            return
        best = restores.best_of(kept, task.run)
        if best is None:
            return
        try:
            done = restore_attempt(self.tx.engine, self.settings, task, task.stage, best.number)
        except Exception as exc:
            self.tick.warn(
                f"{task.slug}: on_halt = best: attempt {best.number} not restored: {exc}"
            )
            return
        what = "restored" if done.commit else "kept (the branch held it)"
        self.tick.say(f"{task.slug}: {task.stage} best attempt {best.number} {what}")


def tick_hooks(kernel: Kernel) -> TickHooks:
    """After the claims (and after the landing, `FEATURES` order): the
    halted `best` stages get their best attempt back."""
    best = BestRestorer(kernel.settings, kernel.tx, kernel.tick, kernel.me)

    def after_claims(options: TickOptions) -> None:
        best.restore_halted()

    return TickHooks(after_claims=after_claims)
