"""Best of N, the read side: which attempts were candidates of a round,
and which candidate each decided round chose (`show`, the gate page)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from orchestrator.storage import repo


def round_facts(conn: Connection, task_id: int) -> dict[int, dict[str, Any]]:
    """attempt id -> its `round`, `candidate`, `candidates` and `winner`
    (the candidate its round's decision named: the winner, or the best of
    a round none passed), for the task's candidates only."""
    a, t = repo.attempts, repo.transitions
    rows = conn.execute(
        select(a.c.id, a.c.round, a.c.candidate, a.c.candidates).where(
            a.c.task_id == task_id, a.c.round.is_not(None)
        )
    ).all()
    if not rows:
        return {}
    named = {
        row[0]
        for row in conn.execute(
            select(t.c.attempt_id).where(t.c.task_id == task_id, t.c.event != "claim")
        )
    }
    return {
        row[0]: {
            "round": row[1],
            "candidate": row[2],
            "candidates": row[3],
            "winner": row[0] in named,
        }
        for row in rows
    }


def slot_label(attempt: dict[str, Any]) -> str:
    """`2/4*`: candidate 2 of 4, chosen by its round; "" for an attempt alone."""
    if attempt.get("round") is None:
        return ""
    mark = "*" if attempt.get("winner") else ""
    return f"r{attempt['round']} {attempt['candidate']}/{attempt['candidates']}{mark}"
