"""The idle tick, answered from SQLite with the standard library alone.

Cron runs `orchestrator tick` every minute, and most of those ticks find
nothing to do; importing SQLAlchemy, click and the tick's jobs to learn that
costs ~30 times `python -c pass`. `try_idle_tick` answers such a tick before
any of them is imported: under the host's tick lock and in one SQLite write
transaction it asks each question a real tick would act on (`DUE`, the SQL
of this module, all of it here), and when every answer is "nothing" it
moves this host's idle row in `ticks` forward exactly as a real idle tick
does (`storage.repo.tick_rows.note_idle_tick`) and exits 0, printing nothing.

It serves every spelling cron uses: `[--config FILE] [--db URL] tick [-q]`
(`--quiet`, `--config=FILE`; the config given, or ORCHESTRATOR_CONFIG, or
the working folder's), from any working folder, as the CLI finds them.

It is conservative by construction: anything it does not vouch for returns
None, and the caller runs the full tick, which then does whatever is due
and reports whatever is wrong. That covers every other option, a
database that is not a SQLite file, a schema revision or a table or column
it does not know (`IDLE_REVISION`, `KNOWN_SCHEMA`), a config a full tick
has not validated in this very form, or another database URL than the one
it was given (`remember`: the full tick writes what it read, keyed by the
config's path and hash, into the state folder), hooks with an
event or a delivery waiting, `keep_worktree_days` (a sweep is due at each
tick), a changed env file, the lock held (`-q`: 75, as a full tick exits),
and any SQLite error.

A new table, column or schema revision turns this path off until this
module is read again and its constants moved on (tests/tick/test_idle.py
fails first). A new thing a tick acts on is one more line in `DUE`: e.g. a
pool pause that has ended,
    ("a pool pause has ended", "SELECT 1 FROM pools WHERE paused_until <= :now LIMIT 1"),

Nothing here may import beyond the standard library (tests check it).
"""

# os.path, not pathlib: importing pathlib would cost this path a tenth of its time.
# ruff: noqa: PTH100, PTH105, PTH108, PTH109, PTH111, PTH113, PTH116, PTH118, PTH120, PTH123

from __future__ import annotations

import os
import sqlite3

# Not `typing.TYPE_CHECKING`: importing typing (or pathlib) would cost this
# path a fifth of its time; the names below are for annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

# The schema this module was written against, table by table. Any other
# revision, table or column: the full tick.
IDLE_REVISION = "0016"
KNOWN_SCHEMA: Mapping[str, frozenset[str]] = {
    "alembic_version": frozenset({"version_num"}),
    "attempts": frozenset(
        [
            "id",
            "task_id",
            "stage",
            "run",
            "number",
            "outcome",
            "pass",
            "score",
            "reasons",
            "next_hint",
            "hint",
            "error",
            "worker_exit",
            "verifier_exit",
            "plateau",
            "late_result",
            "tick_id",
            "lease_token",
            "lease_expires_at",
            "host",
            "boot_id",
            "tick_pid",
            "tick_start",
            "pid",
            "pgid",
            "proc_start",
            "started_at",
            "finished_at",
            "cost_usd",
            "input_tokens",
            "output_tokens",
            "turns",
            "duration_ms",
            "session_id",
            "workspace_hash",
            "workspace_changed",
            "start_commit",
            "commit_sha",
            "pool",
            "restored_at",
            "round",
            "candidate",
            "candidates",
        ]
    ),
    "deliveries": frozenset(
        [
            "id",
            "event_id",
            "hook",
            "tries",
            "last_error",
            "next_try_at",
            "delivered_at",
        ]
    ),
    "events": frozenset(
        [
            "id",
            "kind",
            "task_id",
            "attempt_id",
            "payload",
            "at",
            "dispatched_at",
        ]
    ),
    "land_locks": frozenset(
        [
            "repository",
            "owner",
            "task_id",
            "expires_at",
        ]
    ),
    "pools": frozenset(
        [
            "name",
            "paused_until",
            "paused_at",
            "pause_reason",
            "paused_task_id",
            "pause_streak",
        ]
    ),
    "task_dependencies": frozenset(
        [
            "task_id",
            "after_id",
        ]
    ),
    "tasks": frozenset(
        [
            "id",
            "slug",
            "title",
            "body",
            "pipeline",
            "priority",
            "stage",
            "status",
            "halt_reason",
            "run",
            "version",
            "next_hint",
            "hint_source",
            "host",
            "created_at",
            "updated_at",
            "max_cost_usd",
            "backoff_until",
            "branch",
            "base_branch",
            "base_commit",
            "landed_commit",
            "pr_url",
            "parent_id",
        ]
    ),
    "ticks": frozenset(
        [
            "id",
            "host",
            "pid",
            "started_at",
            "finished_at",
            "claimed",
            "recovered",
            "advanced",
            "exit_code",
        ]
    ),
    "transitions": frozenset(
        [
            "id",
            "task_id",
            "seq",
            "from_state",
            "to_state",
            "event",
            "actor",
            "reason",
            "note",
            "attempt_id",
            "at",
        ]
    ),
}

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
    # tick.pools: the claim that finds a pause over clears it (`pool_resumed`);
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
_MOVE_IDLE_ROW = (
    "UPDATE ticks SET pid = :pid, started_at = :now, finished_at = :now, exit_code = 0 "
    "WHERE id = (SELECT id FROM ticks WHERE host = :host ORDER BY id DESC LIMIT 1) "
    "AND claimed = 0 AND recovered = 0 AND advanced = 0 "
    "AND finished_at IS NOT NULL AND exit_code = 0"
)
_NEW_IDLE_ROW = (
    "INSERT INTO ticks (host, pid, started_at, finished_at, claimed, recovered, advanced, "
    "exit_code) VALUES (:host, :pid, :now, :now, 0, 0, 0, 0)"
)
_SCHEMA = (
    "SELECT m.name, p.name FROM sqlite_master AS m, pragma_table_info(m.name) AS p "
    "WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'"
)

# `run` on SQLite: the gates and ready tasks a tick would take now, by id
# and version (tick.wake decides which new ones wake it).
WAKE_CANDIDATES = (
    "SELECT id, version, status FROM tasks WHERE status = 'approved' OR (status = 'ready' AND "
    "(backoff_until IS NULL OR backoff_until <= CURRENT_TIMESTAMP))"
)

MARKER = ".idle-tick"  # in the state folder: what a full tick read of the config
_QUIET = {"-q", "--quiet"}
CONFIG_ENV = "ORCHESTRATOR_CONFIG"
DB_URL_ENV = "ORCHESTRATOR_DB_URL"
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
        facts = _facts(env, os.getcwd() if cwd is None else str(cwd), config, db)
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
        note = _write_holder(lock_path, os.uname().nodename)
        try:
            return 0 if _idle(facts, host) else None
        finally:
            _remove_holder(lock_path, note)
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
            if not _known(conn) or _due(conn, now, hooks=hooks, best=best):
                conn.execute("ROLLBACK")
                return False
            params = {"pid": os.getpid(), "now": now, "host": host}
            if conn.execute(_MOVE_IDLE_ROW, params).rowcount == 0:
                conn.execute(_NEW_IDLE_ROW, params)
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


def _known(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    if row != [(IDLE_REVISION,)]:
        return False
    found: dict[str, set[str]] = {}
    for table, column in conn.execute(_SCHEMA):
        found.setdefault(table, set()).add(column)
    return found == KNOWN_SCHEMA


def due(conn: sqlite3.Connection, now: str, *, hooks: bool, best: bool = True) -> list[str]:
    """What a real tick would act on, by the name of each `DUE` line."""
    checks = DUE + (BEST_DUE if best else ()) + (HOOKS_DUE if hooks else ())
    return [what for what, sql in checks if conn.execute(sql, {"now": now}).fetchone()]


def _due(conn: sqlite3.Connection, now: str, *, hooks: bool, best: bool) -> bool:
    return bool(due(conn, now, hooks=hooks, best=best))


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


# -- the config, as a full tick read it --------------------------------------------


def _absolute(path: str, base: str) -> str:
    """config.files._absolute, on strings."""
    return os.path.normpath(os.path.join(os.path.abspath(base), os.path.expanduser(path)))


def _config_path(given: str, env: Mapping[str, str], cwd: str) -> str:
    """config.files.find_config: --config, else ORCHESTRATOR_CONFIG, else
    the working folder's (an empty value counts as unset)."""
    return _absolute(given or env.get(CONFIG_ENV, "") or "orchestrator.toml", cwd)


def _database_given(given: str, env: Mapping[str, str], cwd: str) -> str:
    """The database URL given outside the config (--db, else
    ORCHESTRATOR_DB_URL), anchored as config.loader anchors it; "" for none."""
    url = given or env.get(DB_URL_ENV, "")
    return anchored_url(url, os.path.abspath(cwd)) if url else ""


def anchored_url(url: str, base: str) -> str:
    """config.files.resolve_database_url, on strings (tests hold the two to
    one answer): a relative SQLite path is anchored at `base`."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.split("+", 1)[0].lower() != "sqlite" or not rest.startswith("/"):
        return url
    location, qmark, query = rest[1:].partition("?")
    if location in ("", ":memory:") or location.startswith(("/", "file:")):
        return url
    anchor = base.replace("%", "%25").replace("?", "%3F").rstrip("/")
    absolute = os.path.normpath(f"{anchor}/{location}")
    return f"{scheme}:///{absolute}{qmark}{query}"


def _facts(env: Mapping[str, str], cwd: str, config: str, db: str) -> Mapping[str, str] | None:
    """What the full tick read of this config (`remember`), when it still holds.

    The marker is looked for in the default state folder first, where the
    config's hash alone vouches for it (a config with those bytes puts its
    state there); only a config that moved its state folder is parsed, for
    the `state_root` it names (tomllib costs this path a third of its time)."""
    path = _config_path(config, env, cwd)
    with open(path, "rb") as file:
        raw = file.read()
    fingerprint = _sha256(raw)
    home = os.path.dirname(path)
    state_root = _absolute("state", home)
    facts = _read_marker(state_root)
    if facts is None or facts.get("fingerprint") != fingerprint:
        import tomllib

        data = tomllib.loads(raw.decode("utf-8-sig"))
        state = data.get("orchestrator", {}).get("state_root", "state")
        if not isinstance(state, str):
            return None
        state_root = _absolute(state, home)
        facts = _read_marker(state_root)
        if facts is None:
            return None
    expected = {
        "config": path,
        "fingerprint": fingerprint,
        "db": _database_given(db, env, cwd),
        "state_root": state_root,
        "version": MARKER_VERSION,
    }
    if any(facts.get(key) != value for key, value in expected.items()):
        return None
    if not facts.get("database") or facts.get("sweep") != "0":
        return None
    if facts.get("env_file") and facts["env_file"] != _file_stamp(facts["env_file"].split("\t")[0]):
        return None
    return facts


def _sha256(raw: bytes) -> str:
    """config.files.config_fingerprint, from the builtin module when there
    is one (hashlib loads OpenSSL first)."""
    try:
        from _sha2 import sha256  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found, no-redef, unused-ignore]
        except ImportError:
            from hashlib import sha256
    return str(sha256(raw).hexdigest())


# The marker is lines of `key<TAB>value`: json would import `re`, a tenth
# of this path. Bump the version when a key changes meaning.
MARKER_VERSION = "3"


def _read_marker(state_root: str) -> dict[str, str] | None:
    try:
        with open(os.path.join(state_root, MARKER), encoding="utf-8") as file:
            lines = file.read().splitlines()
    except (OSError, UnicodeError):
        return None
    facts: dict[str, str] = {}
    for line in lines:
        key, sep, value = line.partition("\t")
        if not sep:
            return None
        facts[key] = value
    return facts


def _file_stamp(path: str) -> str:
    """What tells an env file changed since the full tick read it."""
    try:
        info = os.lstat(path)
    except OSError:
        return ""
    return "\t".join(map(str, (path, info.st_ino, info.st_size, info.st_mtime_ns, info.st_mode)))


def remember(
    *,
    config: Path | None,
    fingerprint: str,
    database: str | None,
    lock_file: Path,
    state_root: Path,
    busy_timeout: float,
    hooks: bool,
    sweep: bool,
    env_file: Path | None,
    best: bool = True,
    db_given: str | None,
    database_url: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Note what a full tick read of its config, for the next idle tick.

    Written only when it changed; whichever way the tick was told its config
    (--config, ORCHESTRATOR_CONFIG, the working folder), the note is keyed
    by the config's absolute path, so the project folder's `tick -q` and
    cron's line share it. A database URL given outside the config (--db or
    ORCHESTRATOR_DB_URL) is noted as the tick resolved it (`database_url`):
    an idle tick given another is not vouched for. A failure to write it
    merely leaves the next idle ticks on the full path."""
    env = os.environ if environ is None else environ
    outside = db_given or env.get(DB_URL_ENV, "")
    if config is None or (outside and not database_url):
        return
    facts = {
        "version": MARKER_VERSION,
        "config": str(config),
        "fingerprint": fingerprint,
        "db": (database_url or "") if outside else "",
        "state_root": str(state_root),
        "database": database or "",
        "lock_file": str(lock_file),
        "busy_timeout": repr(float(busy_timeout)),
        "hooks": "1" if hooks else "0",
        "sweep": "1" if sweep else "0",
        "best": "1" if best else "0",
        # the path, then its stamp (tab-separated, as the file's lines are not)
        "env_file": "" if env_file is None else _file_stamp(str(env_file)),
    }
    if any("\n" in value for value in facts.values()):
        return  # a path with a newline: the full path it is
    text = "".join(f"{key}\t{value}\n" for key, value in facts.items())
    marker = state_root / MARKER
    try:
        if marker.read_text(encoding="utf-8") == text:
            return
    except (OSError, UnicodeError):
        pass
    try:
        state_root.mkdir(parents=True, exist_ok=True)
        tmp = marker.with_name(f"{MARKER}.{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(marker)
    except OSError:
        return


# -- the lock's holder note, as orchestrator.locking.TickLock writes it ------------


def _write_holder(lock_path: str, host: str) -> str | None:
    """The note a busy tick reads to name whom it waited for (JSON, as
    TickLock writes it; a host name needs no escaping, anything else is
    left to json)."""
    from datetime import UTC, datetime

    since = datetime.now(UTC).isoformat(timespec="seconds")
    if host.replace("-", "").replace(".", "").replace("_", "").isalnum() and host.isascii():
        shown = f'"{host}"'
    else:
        import json

        shown = json.dumps(host)
    note = f'{{"pid": {os.getpid()}, "host": {shown}, "since": "{since}"}}'
    holder = f"{lock_path}.holder"
    tmp = f"{holder}.{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as out:
            out.write(note)
        os.replace(tmp, holder)
    except OSError:
        try:  # noqa: SIM105 - contextlib is one more import on this path
            os.unlink(tmp)
        except OSError:
            pass
        return None
    return note


def _remove_holder(lock_path: str, note: str | None) -> None:
    if note is None:
        return
    holder = f"{lock_path}.holder"
    try:
        with open(holder, encoding="utf-8") as current:
            if current.read() == note:
                os.unlink(holder)
    except OSError:
        pass
