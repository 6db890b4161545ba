"""The idle tick, answered from SQLite with the standard library alone.

Cron runs `orchestrator tick` every minute, and most of those ticks find
nothing to do; importing SQLAlchemy, click and the tick's jobs to learn that
costs ~30 times `python -c pass`. `try_idle_tick` answers such a tick before
any of them is imported: under the host's tick lock and in one SQLite write
transaction it asks each question a real tick would act on (`sql.DUE`, the SQL
of this package, all of it here), and when every answer is "nothing" it
moves this host's idle row in `ticks` forward exactly as a real idle tick
does (`storage.repo.tick_rows.note_idle_tick`) and exits 0, printing nothing.

It serves every spelling cron uses: `[--config FILE] [--db URL] tick [-q]`
(`--quiet`, `--config=FILE`; the config given, or ORCHESTRATOR_CONFIG, or
the working folder's), from any working folder, as the CLI finds them.

It is conservative by construction: anything it does not vouch for returns
None, and the caller runs the full tick, which then does whatever is due
and reports whatever is wrong. That covers every other option, a
database that is not a SQLite file, a schema revision or a table or column
it does not know (`schema.IDLE_REVISION`, `KNOWN_SCHEMA`), a config a full tick
has not validated in this very form, or another database URL than the one
it was given (`marker.remember`: the full tick writes what it read, keyed by the
config's path and hash, into the state folder), hooks with an
event or a delivery waiting, `keep_worktree_days` (a sweep is due at each
tick), a changed env file, the lock held (`-q`: 75, as a full tick exits),
and any SQLite error.

`IDLE_REVISION` and `KNOWN_SCHEMA` are generated from storage/tables.py
(`python -m orchestrator.storage.idle_schema --write`; a test fails while
they are stale): a new table, column or schema revision turns this path off
until they are regenerated, which is the moment to read `DUE` again. A new
thing a tick acts on is one more line in `DUE`: e.g. a pool pause that has
ended,
    ("a pool pause has ended", "SELECT 1 FROM pools WHERE paused_until <= :now LIMIT 1"),

The package's modules: `schema` (generated), `sql` (the SQL), `marker`
(the config as the full tick read it), `holder` (the lock's note); this one
is the entry. Nothing here may import beyond the standard library (tests
check it).
"""

# os.path, not pathlib: importing pathlib would cost this path a tenth of its time.
# ruff: noqa: PTH109, PTH113, PTH116

from __future__ import annotations

import os
import sqlite3

from orchestrator.tick.idle.holder import remove_holder, write_holder
from orchestrator.tick.idle.marker import read_facts
from orchestrator.tick.idle.sql import MOVE_IDLE_ROW, NEW_IDLE_ROW, due, known

# Not `typing.TYPE_CHECKING`: importing typing (or pathlib) would cost this
# path a fifth of its time; the names below are for annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

_QUIET = {"-q", "--quiet"}
_OFF_ENV = ("ORCHESTRATOR_TEST_FAULT",)  # fault injection is the full tick's business


def try_idle_tick(
    argv: Sequence[str], environ: Mapping[str, str] | None = None, cwd: Path | None = None
) -> int | None:
    """The exit status of this `orchestrator` command when it is a tick with
    nothing due, answered and recorded; None when the full program must run."""
    words = _words(argv)
    if words is None:
        return None
    config, db, quiet = words
    env = os.environ if environ is None else environ
    if any(env.get(name) for name in _OFF_ENV):
        return None
    try:
        facts = read_facts(env, os.getcwd() if cwd is None else str(cwd), config, db)
        return None if facts is None else _tick(facts, env, quiet=quiet)
    except Exception:  # whatever it is, the full tick says it properly
        return None


def _words(argv: Sequence[str]) -> tuple[str, str, bool] | None:
    """(--config, --db, quiet) of `[--config FILE] [--db URL] tick [-q]`, as
    click reads them (`--name VALUE` or `--name=VALUE`, the last one given
    wins, "" when absent); None for any other command line."""
    given = {"--config": "", "--db": ""}
    index = 0
    while index < len(argv) and argv[index] != "tick":
        name, eq, value = argv[index].partition("=")
        if name not in given:
            return None
        if not eq:
            index += 1
            if index == len(argv):
                return None
            value = argv[index]
        given[name] = value
        index += 1
    rest = argv[index + 1 :]
    if index == len(argv) or len(rest) > 1 or not set(rest) <= _QUIET:
        return None
    return given["--config"], given["--db"], bool(rest)


def _tick(facts: Mapping[str, str], env: Mapping[str, str], *, quiet: bool) -> int | None:
    import fcntl

    lock_path = facts["lock_file"]
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            # Held: `tick -q` exits 75 and says nothing, as the full one does;
            # without -q the full one names the holder.
            return 75 if quiet else None
        except OSError:
            return None
        # runner.host_name() is socket.gethostname(), the node name.
        host = env.get("ORCHESTRATOR_HOST") or os.uname().nodename
        note = write_holder(lock_path, os.uname().nodename)
        try:
            return 0 if _idle(facts, host) else None
        finally:
            remove_holder(lock_path, note)
    finally:
        os.close(fd)  # releases the flock


def _idle(facts: Mapping[str, str], host: str) -> bool:
    """Whether nothing is due; if so, this host's idle row is moved on, in
    the same write transaction that looked."""
    database = facts["database"]
    if not os.path.isfile(database):
        return False
    timeout = float(facts["busy_timeout"])
    try:
        conn = sqlite3.connect(database, timeout=timeout, isolation_level=None)
    except sqlite3.Error:
        return False
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        conn.execute("PRAGMA synchronous = FULL")
        _settle_wal(conn, database)
        conn.execute("BEGIN IMMEDIATE")
        try:
            now = _now()
            hooks, best = facts["hooks"] != "0", facts.get("best") != "0"
            if not known(conn) or due(conn, now, hooks=hooks, best=best):
                conn.execute("ROLLBACK")
                return False
            params = {"pid": os.getpid(), "now": now, "host": host}
            if conn.execute(MOVE_IDLE_ROW, params).rowcount == 0:
                conn.execute(NEW_IDLE_ROW, params)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return True
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def _now() -> str:
    """The tick's clock as a UTC column stores it on SQLite."""
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _settle_wal(conn: sqlite3.Connection, database: str) -> None:
    """storage.db.settle_wal: a WAL an earlier command left is folded in
    first, without waiting on a reader (best effort, as there)."""
    try:
        left = os.stat(f"{database}-wal").st_size > 0
    except OSError:
        return
    if not left:
        return
    timeout = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.Error:
        pass
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout)}")
