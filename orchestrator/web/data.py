"""The pages' reads: every list is one bounded page, never the whole table.

The board must cost the same for 100 tasks as for 100,000: a page holds
`page_size` rows in section order (the approval queue first), read a section
at a time through the status index and continued by a cursor; counts stop
at `COUNT_CAP`; the attempt count and last score come from correlated
subqueries for the shown rows only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine

from orchestrator.domain.pipeline import Status, state_string
from orchestrator.domain.waits import waiting_line
from orchestrator.features.pools import store as pool_rows
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, read_tx
from orchestrator.storage.reads.board import capped_count, section_rows
from orchestrator.storage.reads.history import history_page_rows
from orchestrator.storage.repo import restores
from orchestrator.views.suggest import unknown_task
from orchestrator.views.ticks import last_tick_text

# The approval queue first, then what moves, then what is settled.
SECTION_ORDER = (
    Status.AWAITING_APPROVAL,
    Status.RUNNING,
    Status.LANDING,
    Status.HELD,
    Status.READY,
    Status.APPROVED,
    Status.HALTED,
    Status.COMPLETE,
    Status.CANCELLED,
)
COUNT_CAP = 1_000
HISTORY_PAGE = 100


@dataclass
class Section:
    status: str
    rows: list[dict[str, Any]]
    count: int  # capped at COUNT_CAP (then shown as "1,000+")


@dataclass
class Board:
    """One page of the board: `page_size` rows in section order, with every
    state's (capped) count above them and a cursor to the next page."""

    counts: list[tuple[str, int]] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    only: str | None = None  # a single state, when filtered
    next_cursor: str | None = None  # "status:offset" where the next page starts
    first: bool = True
    last_tick: str = ""  # "last tick 40 s ago": a quiet cron, or a dead one?
    # (pool, paused until, why) of each pool a usage limit pauses now.
    paused_pools: list[tuple[str, str, str]] = field(default_factory=list)


_OFFSET = re.compile("[0-9]{1,9}")


def parse_cursor(cursor: str | None) -> tuple[str | None, int]:
    """`status:offset` -> (status, offset); anything malformed is the first page."""
    status, _, offset = (cursor or "").partition(":")
    # ASCII digits only, and few: "²" passes isdigit() and a huge number
    # overflows int() and the database's OFFSET; both are just the first page.
    if status not in {s.value for s in SECTION_ORDER} or not _OFFSET.fullmatch(offset):
        return None, 0
    return status, int(offset)


def board(
    engine: Engine, page_size: int, only: str | None = None, cursor: str | None = None
) -> Board:
    statuses = [s for s in SECTION_ORDER if only is None or s.value == only]
    start, offset = parse_cursor(cursor)
    names = [s.value for s in statuses]
    section = names.index(start) if start in names else 0
    offset = offset if start in names else 0
    out = Board(only=only, first=section == 0 and offset == 0)
    with read_tx(engine) as conn:
        out.last_tick = last_tick_text(conn)
        out.paused_pools = paused_pools(conn)
        counts = {s: _capped_count(conn, s) for s in statuses}
        out.counts = [(s.value, counts[s]) for s in statuses]
        room = page_size
        for index in range(section, len(statuses)):
            status = statuses[index]
            if counts[status] < COUNT_CAP and counts[status] <= offset:
                offset = 0
                continue
            rows = _section_rows(conn, status, room + 1, offset)
            if rows[:room]:
                out.sections.append(Section(status.value, rows[:room], counts[status]))
            if len(rows) > room:
                out.next_cursor = f"{status.value}:{offset + room}"
                break
            room -= len(rows)
            offset = 0
            if room == 0:
                later = statuses[index + 1 :]
                following = next((s for s in later if counts[s] > 0), None)
                if following is not None:
                    out.next_cursor = f"{following.value}:0"
                break
    return out


def paused_pools(conn: Connection) -> list[tuple[str, str, str]]:
    now = db_now(conn)
    return [
        (row.name, row.paused_until.isoformat(timespec="seconds"), row.pause_reason or "")
        for row in sorted(pool_rows.pool_rows(conn).values(), key=lambda r: r.name)
        if row.paused_until is not None and row.paused_until > now
    ]


def _capped_count(conn: Connection, status: Status) -> int:
    return capped_count(conn, status.value, COUNT_CAP)


def _section_rows(
    conn: Connection, status: Status, limit: int, offset: int
) -> list[dict[str, Any]]:
    oldest_first = status is Status.AWAITING_APPROVAL
    found = section_rows(conn, status.value, oldest_first=oldest_first, limit=limit, offset=offset)
    rows = []
    for data in found:
        data["state"] = state_string(data["stage"], data["status"])
        # Formatted here: Jinja's `format` filter costs ~20 us a call, a
        # tenth of a page of 100 rows.
        data["score_text"] = "" if data["score"] is None else f"{data['score']:g}"
        data["updated_text"] = when(data["updated_at"])
        rows.append(data)
    if status is Status.READY and rows:  # `add --after`: say what each one waits on
        waits = repo.waits_of(conn, [row["id"] for row in rows])
        for shown in rows:
            shown["waiting"] = waiting_line(waits.get(shown["id"], []))
    return rows


@dataclass
class StageCurve:
    stage: str
    attempts: list[repo.AttemptSnapshot]
    halted_at: int | None  # attempt number the task gave up on at this stage
    halt_reason: str | None


@dataclass
class TaskPage:
    task: repo.TaskSnapshot
    stages: list[StageCurve]
    transitions: list[dict[str, Any]]
    # The best-scoring attempt of each stage's run, and the restored one.
    marks: restores.Marks = field(
        default_factory=lambda: restores.Marks(frozenset(), frozenset(), {})
    )


def task_row(engine: Engine, slug: str) -> repo.TaskSnapshot:
    with read_tx(engine) as conn:
        task = repo.get_task(conn, slug)
        if task is None:
            raise unknown_task(conn, slug)
    return task


def task_page(engine: Engine, slug: str) -> TaskPage:
    """A task's attempts grouped by stage, in the order the stages first ran."""
    with read_tx(engine) as conn:
        task = repo.get_task(conn, slug)
        if task is None:
            raise unknown_task(conn, slug)
        attempts = repo.attempts_of(conn, task.id)
        transitions = repo.transitions_of(conn, task.id)
        marks = restores.task_marks(conn, task.id)
    by_stage: dict[str, list[repo.AttemptSnapshot]] = {}
    for attempt in attempts:
        by_stage.setdefault(attempt.stage, []).append(attempt)
    halts = _halts(transitions, attempts)
    stages = []
    for name, rows in by_stage.items():
        halted_at, reason = halts.get(name, (None, None))
        stages.append(StageCurve(name, rows, halted_at, reason))
    return TaskPage(task, stages, transitions, marks)


def _halts(
    transitions: list[dict[str, Any]], attempts: list[repo.AttemptSnapshot]
) -> dict[str, tuple[int | None, str | None]]:
    """The newest give_up per stage, as (attempt number, reason)."""
    numbers = {a.id: a.number for a in attempts}
    out: dict[str, tuple[int | None, str | None]] = {}
    for row in transitions:
        if row["event"] == "give_up" and row["attempt_id"] in numbers:
            stage = str(row["to_state"]).partition(":")[0]
            out[stage] = (numbers[row["attempt_id"]], row["reason"])
    return out


@dataclass
class HistoryPage:
    rows: list[dict[str, Any]]
    page: int
    has_more: bool


def history_page(
    engine: Engine,
    *,
    task: str | None = None,
    event: str | None = None,
    actor: str | None = None,
    page: int = 1,
) -> HistoryPage:
    """Transitions, newest first, filtered by exact task slug, event and actor."""
    with read_tx(engine) as conn:
        rows = history_page_rows(
            conn,
            task=task,
            event=event,
            actor=actor,
            limit=HISTORY_PAGE + 1,
            offset=(page - 1) * HISTORY_PAGE,
        )
    return HistoryPage(rows[:HISTORY_PAGE], page, len(rows) > HISTORY_PAGE)


def when(value: datetime | str | None) -> str:
    """Times as tables print them: UTC to the second."""
    if value is None:
        return ""
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    return text.replace("T", " ")[:19]
