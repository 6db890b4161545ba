"""The version rows: each version a host loaded (`pipeline_versions`), the
version a task was added on and the one each attempt ran (their
`pipeline_version` columns), and what `show` and `pipelines` read back.

A version's row is written once, by whichever host loads it first: the
insert skips a hash already there, so two hosts recording one version at
once both succeed and the first one's `first_seen` and `host` stay.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, bindparam, func, or_, select, update

from orchestrator.domain.pipeline import Status
from orchestrator.features.versions.definition import PipelineVersion
from orchestrator.storage import tables
from orchestrator.storage.prepared import Prepared

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql, sqlite

versions = tables.pipeline_versions
tasks = tables.tasks
attempts = tables.attempts

# Statuses a task never leaves: a task in any other one is unfinished.
FINISHED = (Status.COMPLETE.value, Status.CANCELLED.value)
_CHUNK = 500  # slugs per `IN` list


@dataclass(frozen=True, slots=True)
class VersionRow:
    hash: str
    pipeline: str
    definition: str  # JSON, for display
    first_seen: datetime
    host: str


@dataclass(frozen=True, slots=True)
class Unfinished:
    """How many unfinished tasks of `pipeline` on `version` stand at `stage`
    (`version` None: tasks from before versions were recorded)."""

    pipeline: str
    version: str | None
    stage: str
    tasks: int


@functools.cache
def _record(dialect: str) -> Prepared:
    """The insert-if-missing of a version's row in `dialect`'s own form,
    built on first use (importing the PostgreSQL dialect costs a SQLite
    tick a tenth of its start)."""
    insert = _insert(dialect).values(
        hash=bindparam("hash"),
        pipeline=bindparam("pipeline"),
        definition=bindparam("definition"),
        first_seen=bindparam("now"),
        host=bindparam("host"),
    )
    return Prepared(insert.on_conflict_do_nothing(index_elements=["hash"]))


def _insert(dialect: str) -> postgresql.Insert | sqlite.Insert:
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql as pg

        return pg.insert(versions)
    from sqlalchemy.dialects import sqlite as lite

    return lite.insert(versions)


def known(conn: Connection, hashes: Collection[str]) -> set[str]:
    """Which of `hashes` have their row already."""
    if not hashes:
        return set()
    query = select(versions.c.hash).where(versions.c.hash.in_(sorted(hashes)))
    return {str(row[0]) for row in conn.execute(query)}


def record(
    conn: Connection, loaded: Sequence[PipelineVersion], *, now: datetime, host: str
) -> None:
    """Each of `loaded` kept, unless its row is there already (idempotent)."""
    statement = _record(conn.dialect.name)
    for version in loaded:
        params = {
            "hash": version.hash,
            "pipeline": version.pipeline,
            "definition": version.as_json(),
            "now": now,
            "host": host,
        }
        statement.execute(conn, params)


_STAMP_ATTEMPT = Prepared(
    update(attempts).where(attempts.c.id == bindparam("id")).values(pipeline_version=bindparam("v"))
)
_MOVE = Prepared(
    update(tasks).where(tasks.c.id == bindparam("id")).values(pipeline_version=bindparam("v"))
)


_TASK_VERSION = Prepared(select(tasks.c.pipeline_version).where(tasks.c.id == bindparam("id")))


def task_version(conn: Connection, task_id: int) -> str | None:
    """The version the task is on (None: from before versions were recorded)."""
    row = _TASK_VERSION.execute(conn, {"id": task_id}).first()
    return None if row is None or row[0] is None else str(row[0])


def off_current(conn: Connection, current: Collection[str]) -> dict[int, str | None]:
    """The unfinished tasks on no version of `current` (an older one, or
    none: from before versions), by id: one read a tick, so that a claim
    asks a dict, not the database, which version its task is on."""
    query = select(tasks.c.id, tasks.c.pipeline_version).where(
        tasks.c.status.not_in(FINISHED),
        or_(tasks.c.pipeline_version.is_(None), tasks.c.pipeline_version.not_in(sorted(current))),
    )
    return {int(i): None if v is None else str(v) for i, v in conn.execute(query)}


def stamp_attempt(conn: Connection, attempt_id: int, version: str) -> None:
    """The attempt runs `version`."""
    _STAMP_ATTEMPT.execute(conn, {"id": attempt_id, "v": version})


def move(conn: Connection, task_id: int, version: str) -> None:
    """The task is on `version` from now on: one from before versions takes
    the version of its first attempt since, one its pipeline upgrades the
    current one's."""
    _MOVE.execute(conn, {"id": task_id, "v": version})


def definition_of(conn: Connection, version: str) -> dict[str, Any]:
    """`version`'s definition as its row shows it ({} when no row has it):
    for display and comparison, never to run anything."""
    row = conn.execute(select(versions.c.definition).where(versions.c.hash == version)).first()
    if row is None:
        return {}
    found = json.loads(row[0])
    return found if isinstance(found, dict) else {}


def unfinished_slugs(conn: Connection, pipeline: str | None, since: str | None) -> list[str]:
    """The unfinished tasks' slugs, oldest first: of `pipeline`, on a version
    whose hash starts with `since`, when given."""
    query = select(tasks.c.slug).where(tasks.c.status.not_in(FINISHED)).order_by(tasks.c.id)
    if pipeline is not None:
        query = query.where(tasks.c.pipeline == pipeline)
    if since is not None:
        query = query.where(tasks.c.pipeline_version.startswith(since.lower(), autoescape=True))
    return [str(slug) for (slug,) in conn.execute(query)]


def stage_names(conn: Connection, version: str) -> tuple[str, ...] | None:
    """The stage names of `version` as its row shows them (None: no row).
    Read to judge an upgrade's compatibility, never to run anything."""
    row = conn.execute(select(versions.c.definition).where(versions.c.hash == version)).first()
    if row is None:
        return None
    try:
        return tuple(str(stage["name"]) for stage in json.loads(row[0])["stages"])
    except (ValueError, KeyError, TypeError):
        return None


def stamp_added(conn: Connection, slugs: Sequence[str], version: str) -> None:
    """Tasks just added (in this transaction) are on `version`."""
    for start in range(0, len(slugs), _CHUNK):
        chunk = list(slugs[start : start + _CHUNK])
        conn.execute(update(tasks).where(tasks.c.slug.in_(chunk)).values(pipeline_version=version))


def of_task(conn: Connection, task_id: int) -> tuple[str | None, dict[int, str | None]]:
    """The task's version and each of its attempts', by attempt id."""
    own = conn.execute(select(tasks.c.pipeline_version).where(tasks.c.id == task_id)).scalar()
    ran = conn.execute(
        select(attempts.c.id, attempts.c.pipeline_version).where(attempts.c.task_id == task_id)
    )
    return (None if own is None else str(own)), {
        int(row[0]): None if row[1] is None else str(row[1]) for row in ran
    }


def hosts_of(conn: Connection, version: str) -> list[str]:
    """The host that recorded `version` first (the one `explain` names as
    holding it); empty when no row has it."""
    query = select(versions.c.host).where(versions.c.hash == version)
    return sorted({str(row[0]) for row in conn.execute(query)})


def all_versions(conn: Connection) -> list[VersionRow]:
    """Every version kept, oldest first per pipeline."""
    query = select(
        versions.c.hash,
        versions.c.pipeline,
        versions.c.definition,
        versions.c.first_seen,
        versions.c.host,
    ).order_by(versions.c.pipeline, versions.c.first_seen, versions.c.hash)
    return [
        VersionRow(str(h), str(p), str(d), f, str(host)) for h, p, d, f, host in conn.execute(query)
    ]


def unfinished(conn: Connection) -> list[Unfinished]:
    """The unfinished tasks counted by pipeline, version and stage."""
    query = (
        select(tasks.c.pipeline, tasks.c.pipeline_version, tasks.c.stage, func.count())
        .where(tasks.c.status.not_in(FINISHED))
        .group_by(tasks.c.pipeline, tasks.c.pipeline_version, tasks.c.stage)
    )
    return [
        Unfinished(str(p), None if v is None else str(v), str(s), int(n))
        for p, v, s, n in conn.execute(query)
    ]
