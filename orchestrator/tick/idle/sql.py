"""What a tick acts on, in SQL a standard-library SQLite connection runs.

Each question a real tick would act on is one line of `DUE` (or of
`BEST_DUE`, `HOOKS_DUE` when the config has them); the idle row's moves are
`storage.repo.tick_rows.note_idle_tick` in SQLite's words.
"""

from __future__ import annotations

import sqlite3

from orchestrator.tick.idle.schema import IDLE_REVISION, KNOWN_SCHEMA

# What a real tick acts on: any row is work, and the full tick runs. Each
# reads what the tick's own query reads (`:now` is the tick's clock, UTC
# text as stored; `CURRENT_TIMESTAMP` where the claim query uses it) and may
# answer "due" more often than the tick would act (no host or pid test):
# then the full tick merely finds nothing, never the other way round.
DUE: tuple[tuple[str, str], ...] = (
    # storage.repo.claims.find_claimable, without the host and exclusions.
    # A task that waits on another not yet complete (`add --after`) is not
    # claimable; a paused pool's tasks are still counted (the full tick
    # looks, and finds the pause).
    (
        "a ready task whose backoff has ended",
        "SELECT 1 FROM tasks WHERE status = 'ready' AND "
        "(backoff_until IS NULL OR backoff_until <= CURRENT_TIMESTAMP) AND NOT EXISTS "
        "(SELECT 1 FROM task_dependencies AS d JOIN tasks AS o ON o.id = d.after_id "
        "WHERE d.task_id = tasks.id AND o.status <> 'complete') LIMIT 1",
    ),
    # features.landing.landing.Lander.land_all
    ("a task landing", "SELECT 1 FROM tasks WHERE status = 'landing' LIMIT 1"),
    # ext.hooks.TickHooks.hold_finished: the feature holding it looks each tick
    # (at most as often as its own config says).
    ("a task held", "SELECT 1 FROM tasks WHERE status = 'held' LIMIT 1"),
    # features.pools: the claim that finds a pause over clears it (`pool_resumed`);
    # only a claim does, so an ended pause with no task to claim (its pool
    # renamed, its tasks halted) is no work: the full tick leaves it as is.
    (
        "a pool pause that has ended",
        "SELECT 1 FROM pools WHERE paused_until IS NOT NULL AND paused_until <= :now "
        "AND EXISTS (SELECT 1 FROM tasks WHERE status = 'ready' AND "
        "(backoff_until IS NULL OR backoff_until <= CURRENT_TIMESTAMP)) LIMIT 1",
    ),
    # tick.claims.Claimer.advance_approved
    ("an approved gate", "SELECT 1 FROM tasks WHERE status = 'approved' LIMIT 1"),
    # tick.recovery.Recovery._orphans (alive or not: the full tick judges)
    ("an open attempt", "SELECT 1 FROM attempts WHERE finished_at IS NULL LIMIT 1"),
    # tick.dead_ticks.close_dead_ticks (storage.repo.tick_rows.open_tick_rows)
    (
        "a tick row left open",
        "SELECT 1 FROM ticks WHERE finished_at IS NULL "
        "AND id > (SELECT coalesce(max(id), 0) FROM ticks) - 100 LIMIT 1",
    ),
)
# Only with a stage of `on_halt = "best"` (the marker's `best`): elsewhere
# the full tick leaves a halt as it is, and it may wait days for a human.
BEST_DUE: tuple[tuple[str, str], ...] = (
    # tick.best_restore.BestRestorer (storage.repo.restores.halted_for_best):
    # a halt whose best attempt may not be back yet.
    (
        "a halted branch task that on_halt may restore",
        "SELECT 1 FROM tasks WHERE status = 'halted' "
        "AND halt_reason IN ('score_plateau', 'max_attempts') AND branch IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM attempts AS a WHERE a.task_id = tasks.id "
        "AND a.stage = tasks.stage AND a.restored_at >= tasks.updated_at) LIMIT 1",
    ),
)
# Only with hooks configured (events.courier.Courier.start); without them
# events wait untouched, as in a real tick.
HOOKS_DUE: tuple[tuple[str, str], ...] = (
    (
        "an event not handed to the hooks",
        "SELECT 1 FROM events WHERE dispatched_at IS NULL LIMIT 1",
    ),
    (
        "a hook delivery due",
        "SELECT 1 FROM deliveries WHERE delivered_at IS NULL AND next_try_at <= :now LIMIT 1",
    ),
)

# storage.repo.tick_rows.note_idle_tick, in SQLite's words.
MOVE_IDLE_ROW = (
    "UPDATE ticks SET pid = :pid, started_at = :now, finished_at = :now, exit_code = 0 "
    "WHERE id = (SELECT id FROM ticks WHERE host = :host ORDER BY id DESC LIMIT 1) "
    "AND claimed = 0 AND recovered = 0 AND advanced = 0 "
    "AND finished_at IS NOT NULL AND exit_code = 0"
)
NEW_IDLE_ROW = (
    "INSERT INTO ticks (host, pid, started_at, finished_at, claimed, recovered, advanced, "
    "exit_code) VALUES (:host, :pid, :now, :now, 0, 0, 0, 0)"
)
SCHEMA_COLUMNS = (
    "SELECT m.name, p.name FROM sqlite_master AS m, pragma_table_info(m.name) AS p "
    "WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'"
)

# `run` on SQLite: the gates and ready tasks a tick would take now, by id
# and version (tick.wake decides which new ones wake it).
WAKE_DUE = (
    "SELECT id, version, status FROM tasks WHERE status = 'approved' OR (status = 'ready' AND "
    "(backoff_until IS NULL OR backoff_until <= CURRENT_TIMESTAMP))"
)


def known(conn: sqlite3.Connection) -> bool:
    """Whether the database is at the revision, tables and columns this
    package was written for (`schema`); anything else is the full tick's."""
    row = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    if row != [(IDLE_REVISION,)]:
        return False
    found: dict[str, set[str]] = {}
    for table, column in conn.execute(SCHEMA_COLUMNS):
        found.setdefault(table, set()).add(column)
    return found == KNOWN_SCHEMA


def due(conn: sqlite3.Connection, now: str, *, hooks: bool, best: bool = True) -> list[str]:
    """What a real tick would act on, by the name of each `DUE` line."""
    checks = DUE + (BEST_DUE if best else ()) + (HOOKS_DUE if hooks else ())
    return [what for what, sql in checks if conn.execute(sql, {"now": now}).fetchone()]
