"""`Project`: the orchestrator from Python, as the CLI and the demo use it.

A notebook, a test or another scheduler drives a project through the same
calls the commands make: `Project.open()` reads the config the way the CLI
does (`--config`, `ORCHESTRATOR_CONFIG`, `./orchestrator.toml`; `db` as
`--db`), refuses a database whose schema is not at head, and closes its
engine on leaving the `with` block. Every method is one short transaction
or one tick; errors are the `orchestrator.errors` classes, whose
`exit_code` is the status the CLI would exit with.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from orchestrator.api import actions
from orchestrator.api.actions import ActionResult
from orchestrator.api.adding import TaskSpec, add_tasks, refuse_old_state
from orchestrator.api.database import migrate_database, open_engine, schema_revision
from orchestrator.api.reading import event_views, explain_view, task_view
from orchestrator.api.results import (
    CalibrateResult,
    EventView,
    Metrics,
    MigrateResult,
    PrunedFolder,
    PruneResult,
    RemovedWorktree,
    RestoreResult,
    SchemaRevision,
)
from orchestrator.api.types import (
    ExplainView,
    HistoryRow,
    PipelineView,
    PoolView,
    ScoreRow,
    TaskRow,
    TaskView,
    of_json,
)
from orchestrator.config import Settings, config_fingerprint, load_settings
from orchestrator.errors import RefusedError
from orchestrator.locking import TickLock
from orchestrator.storage.repo.outbox import with_hooks
from orchestrator.views import reports

if TYPE_CHECKING:
    from orchestrator.api.ticking import TickResult


class Project:
    """One project's tasks, gates, ticks and history.

    Build it with `Project.open()`, or from `Settings` and an `Engine` you
    own (then `close()` disposes that engine)."""

    def __init__(self, settings: Settings, engine: Engine) -> None:
        self.settings = settings
        # Events its commands write go to the hooks configured now.
        self.engine = with_hooks(engine, settings.hooks)

    @classmethod
    def open(cls, config: str | Path | None = None, *, db: str | None = None) -> Project:
        """The project of `config` (default: as the CLI finds it); `db` overrides its database."""
        settings = load_settings(config=config, db_url=db, require_config=db is None)
        return cls(settings, open_engine(settings))

    def close(self) -> None:
        """Dispose the engine (`with` does it on leaving the block)."""
        self.engine.dispose()

    def __enter__(self) -> Project:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- tasks and gates -----------------------------------------------------------

    def add(
        self,
        slug: str,
        title: str,
        *,
        body: str = "",
        pipeline: str = "default",
        priority: int = 0,
        budget: float | None = None,
        by: str | None = None,
        after: Sequence[str] = (),
    ) -> None:
        """Add a task at the first stage of its pipeline; `budget` (USD of
        recorded cost) halts it as `budget` once reached; it is not claimed
        until every task in `after` is complete (`DependencyError`, exit 65,
        for one that does not exist or a cycle)."""
        spec = TaskSpec(slug, title, pipeline, priority, body, budget, tuple(after))
        self.add_many([spec], by=by)

    def add_many(self, specs: Sequence[TaskSpec], *, by: str | None = None) -> int:
        """Add tasks in one transaction: all of them, or none. Returns how many."""
        from orchestrator.compose import tasks_added

        refuse_old_state(self.engine, self.settings, specs)
        return add_tasks(self.engine, self.settings, specs, actions.actor_name(by), tasks_added)

    def approve(
        self,
        slug: str,
        *,
        note: str | None = None,
        by: str | None = None,
        expect: str | None = None,
    ) -> ActionResult:
        """Open the gate `slug` waits at; approving again changes nothing.

        With `expect` (an approval hash from `task()` or the gate page), refuse
        if what the gate shows changed since it was hashed. A branch task whose
        worktree holds changes beyond its stage commit needs `expect`: what
        moves on is the tree that hash covered, never a later edit."""
        from orchestrator.api.approving import approve_gate

        return approve_gate(
            self.engine, self.settings, slug, actions.actor_name(by), note, expect or None
        )

    def reject(
        self, slug: str, note: str, *, by: str | None = None, to: str | None = None
    ) -> ActionResult:
        """Send a gate back: its stage, or `to` (an earlier stage of the task's
        pipeline), runs again with `note` as the hint."""
        return actions.reject(self.engine, self.settings, slug, actions.actor_name(by), note, to)

    def halt(self, slug: str, *, note: str | None = None, by: str | None = None) -> ActionResult:
        """Stop `slug` where it is; a running attempt stops within seconds."""
        return actions.halt(self.engine, slug, actions.actor_name(by), note)

    def resume(
        self,
        slug: str,
        *,
        note: str | None = None,
        by: str | None = None,
        budget: float | None = None,
    ) -> ActionResult:
        """Make a halted task ready again at its stage, with a fresh plateau window;
        `budget` gives it its own (above what it has spent)."""
        return actions.resume(self.engine, slug, actions.actor_name(by), note, budget=budget)

    def cancel(self, slug: str, *, note: str | None = None, by: str | None = None) -> ActionResult:
        """End `slug` for good; a running attempt stops within seconds."""
        return actions.cancel(self.engine, slug, actions.actor_name(by), note)

    def restore(self, slug: str, attempt: int, *, stage: str | None = None) -> RestoreResult:
        """Put attempt number `attempt` of `stage` (default: the task's
        stage) back on the task's branch, as `orchestrator restore`: a new
        commit whose tree is that attempt's kept work (`commit` None when
        the branch held it already)."""
        from orchestrator.api.restore import restore

        return of_json(RestoreResult, restore(self.engine, self.settings, slug, attempt, stage))

    def calibrate(self, slug: str, stage: str, samples: int) -> CalibrateResult:
        """Run `stage`'s verifier `samples` times on the task's workspace,
        recording nothing: the scores' mean, stdev, min, max and a
        suggested plateau `min_delta`, as `calibrate --json`."""
        from orchestrator.api.restore import calibrate

        found = calibrate(self.engine, self.settings, slug, stage, samples)
        return of_json(CalibrateResult, found.as_dict())

    # -- ticking -------------------------------------------------------------------

    def tick(
        self,
        *,
        max_tasks: int | None = None,
        max_seconds: float | None = None,
        jobs: int = 1,
        task: str | None = None,
        dry_run: bool = False,
        wait: float = 0.0,
        say: Callable[[str], None] = lambda line: None,
        warn: Callable[[str], None] = lambda line: None,
        stop: threading.Event | None = None,
    ) -> TickResult:
        """One tick under this host's tick lock (waiting up to `wait` seconds
        for it, else `LockBusyError`), as `orchestrator tick` runs it. `say`
        gets each attempt result or state change, `warn` each error the tick
        went on past; the result's `exit_status` is the command's."""
        # Imported here: `list` or `show` need not load the engine.
        from orchestrator.api.ticking import TickOptions, run_tick

        self._reread_config()
        options = TickOptions(max_tasks, max_seconds, jobs, task, dry_run)
        # Each running attempt may hold a connection: more jobs, a bigger pool.
        engine = self.engine if jobs == 1 else open_engine(self.settings, jobs=jobs)
        lock = TickLock(self.settings.lock_file)
        try:
            lock.acquire(wait)
            return run_tick(self.settings, engine, options, stop=stop, say=say, warn=warn)
        finally:
            lock.release()  # a no-op when it was never ours
            if engine is not self.engine:
                engine.dispose()

    def _reread_config(self) -> None:
        """Read the config again when it was edited since it was read, as `run`
        does before each tick: a tick stops claiming when its config changed
        under it, so a long-lived Project would otherwise never claim again.
        The database stays the one this Project opened (its engine's)."""
        path = self.settings.config_path
        if path is None or config_fingerprint(path) == self.settings.fingerprint:
            return
        self.settings = load_settings(
            config=path, db_url=self.settings.database_url, require_config=True
        )
        self.engine = with_hooks(self.engine, self.settings.hooks)  # the hooks it names now

    # -- reading -------------------------------------------------------------------

    def tasks(self, state: str | None = None) -> list[TaskRow]:
        """Tasks in creation order, as `list --json`; `state` as `list --state`."""
        rows = reports.list_tasks(self.engine, state, self._stages())
        return [of_json(TaskRow, row) for row in rows]

    def pools(self) -> list[PoolView]:
        """Each pool: running, spent today (UTC), paused until when and why
        (`pool list --json`)."""
        from orchestrator.api.pools import pool_list

        return [of_json(PoolView, row) for row in pool_list(self.engine, self.settings)]

    def pipelines(self) -> list[PipelineView]:
        """Each pipeline's versions, the current one (what this host's config
        and prompt files make now) and its unfinished tasks per version and
        stage (`pipelines --json`)."""
        from orchestrator.api.reading import pipeline_views

        return pipeline_views(self.engine, self.settings)

    def resume_pool(self, name: str, *, by: str | None = None) -> ActionResult:
        """End the pool's pause now (`pool resume NAME`); the pool claims at
        the next tick on every host."""
        from orchestrator.api.pools import resume_pool

        return resume_pool(self.engine, self.settings, name, actions.actor_name(by))

    def task(self, slug: str) -> TaskView:
        """One task with its transitions and attempts, as `show --json`; a task
        at a gate also carries the `approval_hash` that `approve(expect=)` checks
        and the `answer` its agent gave (the text out of its JSON envelope)."""
        return task_view(self.engine, self.settings, slug)

    def diff(self, slug: str, stage: str | None = None, stat: bool = False) -> str:
        """The task's whole change against its base commit (committed,
        uncommitted and untracked), or `stage`'s part, as `git diff` prints it."""
        from orchestrator.views.branch import task_diff

        return task_diff(self.engine, self.settings, slug, stage, stat)

    def explain(self, slug: str) -> ExplainView:
        """Why the task is where it is and what the next tick will do, as `explain --json`."""
        return explain_view(self.engine, self.settings, slug)

    def history(self, slug: str | None = None, limit: int | None = None) -> list[HistoryRow]:
        """Transitions, oldest first (every task's, or `slug`'s); `limit` keeps the newest."""
        return [of_json(HistoryRow, row) for row in reports.history(self.engine, slug, limit)]

    def scores(self, slug: str, stage: str | None = None) -> list[ScoreRow]:
        """`slug`'s score history: one row per attempt with a valid verdict."""
        rows = reports.scores(self.engine, slug, stage, self._stages())
        return [of_json(ScoreRow, row) for row in rows]

    def events(self, *, pending: bool = False, limit: int | None = 50) -> list[EventView]:
        """The newest `limit` events (None: all), oldest first, each with its
        hooks' deliveries, as `events --json`; `pending`: only those some hook
        has not received yet."""
        return event_views(self.engine, self.settings, pending=pending, limit=limit)

    def metrics(self) -> Metrics:
        """Tasks, attempts, ticks, approvals, pools and hook deliveries in
        Prometheus text format, read in one transaction, as `metrics` prints."""
        from orchestrator.views.metrics import render_metrics

        return Metrics(render_metrics(self.engine))

    def prune(
        self,
        *,
        older_than: float | None = None,
        finished: bool = False,
        dry_run: bool = False,
        on_worktree: Callable[[RemovedWorktree], None] = lambda removed: None,
    ) -> PruneResult:
        """Remove what finished tasks leave on disk, as `prune`; database rows
        stay. With `finished`, the worktrees of complete or cancelled branch
        tasks (those finished `older_than` days ago, or all), each branch kept;
        with `older_than`, the state_root folders of tasks finished that long
        ago. `on_worktree` hears of each worktree before any folder goes: the
        folders may fail after the worktrees are gone. Neither asked for is
        `RefusedError`."""
        from orchestrator.api.prune import prune
        from orchestrator.api.worktrees import finished_worktrees

        if older_than is None and not finished:
            raise RefusedError("prune needs older_than, finished, or both")
        worktrees: list[RemovedWorktree] = []
        if finished:
            gone = finished_worktrees(
                self.engine, self.settings, days=older_than or 0.0, dry_run=dry_run
            )
            for item in gone:
                removed = RemovedWorktree(item.slug, item.workspace, item.branch, item.error)
                on_worktree(removed)
                worktrees.append(removed)
        if older_than is None:
            return PruneResult(dry_run, tuple(worktrees))
        result = prune(
            self.engine,
            self.settings.state_root,
            days=older_than,
            dry_run=dry_run,
            workspace_root=self.settings.workspace_root,
        )
        folders = tuple(PrunedFolder(f.slug, f.path, f.size) for f in result.folders)
        return PruneResult(dry_run, tuple(worktrees), folders, result.kept)

    # -- the schema ----------------------------------------------------------------

    @classmethod
    def migrate(
        cls,
        settings: Settings,
        revision: str = "head",
        *,
        down: bool = False,
        force: bool = False,
    ) -> MigrateResult:
        """Create the database or upgrade its schema to `revision`, or with
        `down` take it back there (`base` removes every table), as `db
        upgrade` / `db downgrade`. A class method: `open()` refuses a schema
        not at head, which is what this mends. Refused (`LockBusyError`, 75)
        while a tick holds the lock or attempts are unfinished, unless `force`."""
        return migrate_database(settings, revision, down=down, force=force)

    @classmethod
    def schema_revision(cls, settings: Settings) -> SchemaRevision:
        """The database's schema revision (None: empty) and this code's, as `db current`."""
        return schema_revision(settings)

    def sql(self, query: str) -> tuple[list[str], list[tuple[object, ...]]]:
        """Column names and rows of one read-only query."""
        return reports.run_sql(self.engine, query)

    def _stages(self) -> set[str]:
        return {s.name for p in self.settings.pipelines.values() for s in p.stages}


__all__ = ["ActionResult", "Project", "TaskSpec"]
