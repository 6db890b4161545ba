"""Checks of the database: reachable, at head, leases and parked tasks.

Doctor never creates or changes a database; it only reads it, so running it
against a live project is safe.
"""

from __future__ import annotations

from sqlalchemy import Engine

from orchestrator.config import Settings
from orchestrator.doctor.report import Check, Level
from orchestrator.errors import OrchestratorError


def _database_checks(settings: Settings) -> list[Check]:
    from sqlalchemy.engine import make_url

    from orchestrator.storage.db import make_engine
    from orchestrator.storage.driver_errors import translate_errors

    shown = make_url(settings.database_url).render_as_string(hide_password=True)
    try:
        engine = make_engine(settings.database_url, busy_timeout=min(settings.busy_timeout, 5))
    except OrchestratorError as exc:
        return [Check(Level.FAIL, "database", str(exc))]
    try:
        with translate_errors(engine):
            checks = _inspect_database(engine, shown)
            if all(check.level is not Level.FAIL for check in checks):
                from orchestrator.doctor.ticks import tick_checks

                checks += _parked_checks(engine, settings)
                checks += tick_checks(engine, settings)
            return checks
    except OrchestratorError as exc:
        return [Check(Level.FAIL, "database", f"{shown}: {exc}")]
    except Exception as exc:  # an unknown driver error is still a report line
        return [Check(Level.FAIL, "database", f"{shown}: {type(exc).__name__}: {exc}")]
    finally:
        engine.dispose()


def _inspect_database(engine: Engine, shown: str) -> list[Check]:
    from orchestrator.storage.db import read_tx
    from orchestrator.storage.schema import HEAD, REVISIONS, current_revision

    checks: list[Check] = []
    with read_tx(engine) as conn:
        revision = current_revision(conn)
    if revision == HEAD:
        checks.append(Check(Level.OK, "database", f"{shown} at revision {HEAD} (head)"))
    elif revision is None:
        checks.append(
            Check(Level.FAIL, "database", f"{shown} is empty; run `orchestrator db upgrade`")
        )
        return checks
    elif revision in REVISIONS:
        checks.append(
            Check(
                Level.FAIL,
                "database",
                f"{shown} at revision {revision}, this code needs {HEAD}; "
                "run `orchestrator db upgrade`",
            )
        )
        return checks
    else:
        checks.append(
            Check(
                Level.FAIL,
                "database",
                f"{shown} at revision {revision}, newer than this orchestrator ({HEAD}); "
                "upgrade orchestrator",
            )
        )
        return checks
    if engine.dialect.name == "sqlite":
        checks += _sqlite_checks(engine)
    checks.append(_lease_check(engine))
    return checks


def _sqlite_checks(engine: Engine) -> list[Check]:
    from orchestrator.storage.db import read_tx

    # A read transaction: in WAL mode it neither waits for the tick's writer
    # nor holds it up, however long quick_check takes on a large file.
    with read_tx(engine) as conn:
        mode = str(conn.exec_driver_sql("PRAGMA journal_mode").scalar_one()).lower()
        results = [str(row[0]) for row in conn.exec_driver_sql("PRAGMA quick_check")]
    checks = []
    if mode == "wal":
        checks.append(Check(Level.OK, "journal", "journal_mode=wal"))
    else:
        checks.append(
            Check(
                Level.WARN,
                "journal",
                f"journal_mode={mode}, not wal: readers block the tick; "
                "`orchestrator db upgrade` switches it",
            )
        )
    if results == ["ok"]:
        checks.append(Check(Level.OK, "integrity", "PRAGMA quick_check: ok"))
    else:
        first = results[0] if results else "no answer"
        checks.append(
            Check(
                Level.FAIL,
                "integrity",
                f"PRAGMA quick_check: {first} ({len(results)} problems); restore a backup",
            )
        )
    return checks


def _lease_check(engine: Engine) -> Check:
    from orchestrator.storage import repo
    from orchestrator.storage.db import db_now, read_tx

    with read_tx(engine) as conn:
        now = db_now(conn)
        unfinished = repo.unfinished_attempts(conn)
    if not unfinished:
        return Check(Level.OK, "attempts", "no unfinished attempts")
    expired = [a for a in unfinished if a.lease_expires_at < now]
    if expired:
        first = expired[0]
        return Check(
            Level.WARN,
            "attempts",
            f"{len(expired)} of {len(unfinished)} unfinished attempts have expired leases "
            f"(e.g. attempt {first.id} at {first.stage}, on {first.host}); "
            "the next tick recovers them as crashed",
        )
    return Check(
        Level.OK,
        "attempts",
        f"{len(unfinished)} attempts running under live leases",
    )


def _parked_checks(engine: Engine, settings: Settings) -> list[Check]:
    """Tasks at a pipeline or stage the config no longer has: the next tick
    halts them as `unknown_stage`; better to learn it now, with their names."""
    from orchestrator.storage.reads.tasks import unfinished_positions

    with engine.connect() as conn:
        rows = unfinished_positions(conn)
    lost: list[str] = []
    for slug, pipeline_name, stage in rows:
        pipeline = settings.pipeline(pipeline_name)
        if pipeline is None or pipeline.stage(stage) is None:
            lost.append(f"{slug} ({pipeline_name}.{stage})")
    if not lost:
        return []
    shown = ", ".join(lost[:5]) + (f" and {len(lost) - 5} more" if len(lost) > 5 else "")
    return [
        Check(
            Level.WARN,
            "stages",
            f"{len(lost)} unfinished task(s) at a stage the config no longer has: {shown}; "
            "the next tick halts them as unknown_stage (restore the stage, or cancel them)",
        )
    ]
