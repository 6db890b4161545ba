"""The outbox's queries for the courier: hand events to hooks, claim a try,
record how it went. Each claim is a compare-and-set on `tries`, so two
ticks (two hosts) never run the same try of the same delivery.

A hook is whatever has the few attributes these queries read (`Hook`,
`DeliveryHook`): the configuration's `HookConfig` lives in `events/`, a
layer above, which storage never imports."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy import Connection, func, insert, select, update

from orchestrator.storage import tables

events = tables.events
deliveries = tables.deliveries
BATCH = 200
# A claimed try is not due again until its hook's timeout plus this has
# passed: a tick that died mid-try leaves it to the next one after that.
CLAIM_GRACE = 30.0
STALE_AFTER = timedelta(days=1)


class Hook(Protocol):
    """What writing a delivery row reads of a hook."""

    @property
    def name(self) -> str: ...

    def wants(self, kind: str) -> bool: ...


class DeliveryHook(Hook, Protocol):
    """What claiming and recording a try read of a hook."""

    @property
    def timeout_seconds(self) -> float: ...

    def backoff(self, tries: int) -> float: ...


H = TypeVar("H", bound=DeliveryHook)


@dataclass(frozen=True)
class Try(Generic[H]):
    delivery_id: int
    hook: H
    tries: int  # counting this one
    payload: dict[str, Any]


def dispatch(conn: Connection, hooks: tuple[Hook, ...], now: datetime) -> int:
    """Make the delivery rows of events not handed out yet (one per hook
    configured now that wants the kind); returns how many events.

    Those are events written while no hook was configured (a writer with
    hooks hands its events out itself, `outbox.record`). The ones older than
    STALE_AFTER are handed out to nobody: a hook added today must not
    replay last month."""
    rows = conn.execute(
        select(events.c.id, events.c.kind, events.c.at)
        .where(events.c.dispatched_at.is_(None))
        .order_by(events.c.id)
        .limit(BATCH)
    ).all()
    for event_id, kind, at in rows:
        taken = conn.execute(
            update(events)
            .where(events.c.id == event_id, events.c.dispatched_at.is_(None))
            .values(dispatched_at=now)
        )
        if taken.rowcount != 1:
            continue  # another tick handed it out meanwhile
        if _aware(at) >= now - STALE_AFTER:
            hand_out(conn, event_id, kind, hooks, now)
    return len(rows)


def hand_out(
    conn: Connection, event_id: int, kind: str, hooks: tuple[Hook, ...], now: datetime
) -> None:
    """One delivery row, due now, per hook in `hooks` that wants `kind`."""
    wanted = [hook.name for hook in hooks if hook.wants(kind)]
    if wanted:
        conn.execute(
            insert(deliveries),
            [
                {"event_id": event_id, "hook": name, "tries": 0, "next_try_at": now}
                for name in wanted
            ],
        )


def claim_due(
    conn: Connection,
    hooks: tuple[H, ...],
    now: datetime,
    skip: set[int],
    room: dict[str, int],
) -> list[Try[H]]:
    """Claim deliveries whose next try is due, up to `room[name]` of each
    hook (its free in-flight slots), so one hook's backlog never takes
    another's turn. A hook no longer configured keeps its rows, pending,
    until it is configured again."""
    claimed: list[Try[H]] = []
    for hook in hooks:
        limit = room.get(hook.name, 0)
        if limit <= 0:
            continue
        rows = conn.execute(
            select(deliveries.c.id, deliveries.c.tries, events.c.payload)
            .join(events, events.c.id == deliveries.c.event_id)
            .where(
                deliveries.c.delivered_at.is_(None),
                deliveries.c.next_try_at <= now,
                deliveries.c.hook == hook.name,
            )
            .order_by(deliveries.c.next_try_at, deliveries.c.id)
            .limit(limit + len(skip))
        ).all()
        hold = now + timedelta(seconds=hook.timeout_seconds + CLAIM_GRACE)
        taken_here = 0
        for delivery_id, tries, payload in rows:
            if delivery_id in skip or taken_here >= limit:
                continue
            taken = conn.execute(
                update(deliveries)
                .where(
                    deliveries.c.id == delivery_id,
                    deliveries.c.tries == tries,
                    deliveries.c.delivered_at.is_(None),
                )
                .values(tries=tries + 1, next_try_at=hold)
            )
            if taken.rowcount == 1:
                taken_here += 1
                claimed.append(Try(int(delivery_id), hook, int(tries) + 1, json.loads(payload)))
    return claimed


def record_try(conn: Connection, done: Try[H], error: str | None, now: datetime) -> None:
    """The try's result; fenced by `tries`, so a try that outlived its claim
    (another tick took the delivery over) does not overwrite the newer one."""
    values: dict[str, Any]
    if error is None:
        values = {"delivered_at": now, "last_error": None}
    else:
        wait = timedelta(seconds=done.hook.backoff(done.tries))
        values = {"last_error": error, "next_try_at": now + wait}
    conn.execute(
        update(deliveries)
        .where(
            deliveries.c.id == done.delivery_id,
            deliveries.c.tries == done.tries,
            deliveries.c.delivered_at.is_(None),
        )
        .values(**values)
    )


def next_due(conn: Connection, hooks: tuple[Hook, ...]) -> datetime | None:
    """When the earliest undelivered delivery of a configured hook is due."""
    if not hooks:
        return None
    value = conn.execute(
        select(func.min(deliveries.c.next_try_at)).where(
            deliveries.c.delivered_at.is_(None),
            deliveries.c.hook.in_([hook.name for hook in hooks]),
        )
    ).scalar()
    return None if value is None else _aware(value)


def _aware(value: datetime | str) -> datetime:
    """SQLite's min() loses the column's type: text, or naive UTC."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value
