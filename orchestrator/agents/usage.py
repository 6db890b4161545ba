"""What an agent reports it spent, and the plain values read out of its
output: the vocabulary every kind's parser (`agents.kinds`) speaks.

Below the kinds and the registry, so a kind's module can build a `Usage`
without importing the dispatch (`agents.output`) that asks the registry.
Pure.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields, replace
from typing import Any

from orchestrator.domain.text import clean_text

# The usage columns are INTEGER (int4 on PostgreSQL): a larger count is no count.
MAX_COUNT = 2**31 - 1
MAX_SESSION_ID = 255


@dataclass(frozen=True)
class Usage:
    """What an agent reported spending; None where it said nothing."""

    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    turns: int | None = None
    duration_ms: int | None = None
    session_id: str | None = None

    @property
    def empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self))

    def filled_from(self, other: Usage) -> Usage:
        """Ours where we have a value, `other`'s where we have none."""
        return replace(
            self,
            **{
                f.name: getattr(other, f.name)
                for f in fields(self)
                if getattr(self, f.name) is None
            },
        )

    def plus(self, other: Usage) -> Usage:
        """Two commands of one attempt: numbers add up, the first session id stays."""
        summed: dict[str, Any] = {}
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if f.name == "session_id":
                summed[f.name] = mine if mine is not None else theirs
            elif mine is None or theirs is None:
                summed[f.name] = theirs if mine is None else mine
            else:
                summed[f.name] = mine + theirs
        return Usage(**summed)

    def columns(self) -> dict[str, Any]:
        """The attempt's columns of the same names. Sums (of turns, of two
        commands) are checked again: one past the columns' range is dropped,
        not allowed to make the attempt unrecordable."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, value in values.items():
            if name == "cost_usd":
                values[name] = as_number(value)
            elif name != "session_id":
                values[name] = as_count(value)
        return values


@dataclass(frozen=True)
class AgentOutput:
    """The text to look for the verdict in, the usage, and the agent's own error."""

    message: str
    usage: Usage = Usage()
    error: str | None = None


def usage_from_report(data: object) -> Usage:
    """The usage a command wrote to `$ORCHESTRATOR_USAGE_FILE`
    (`cost_usd`, `input_tokens`, `output_tokens`, `session_id`, and
    optionally `turns`, `duration_ms`); keys of the wrong type are ignored."""
    if not isinstance(data, dict):
        return Usage()
    return Usage(
        cost_usd=as_number(data.get("cost_usd")),
        input_tokens=as_count(data.get("input_tokens")),
        output_tokens=as_count(data.get("output_tokens")),
        turns=as_count(data.get("turns")),
        duration_ms=as_count(data.get("duration_ms")),
        session_id=as_text(data.get("session_id")),
    )


def last_json_object(lines: list[str]) -> dict[str, Any] | None:
    """The envelope is the last line; anything printed before it is noise."""
    for line in reversed(lines):
        found = json_object(line)
        if found is not None:
            return found
    return None


def json_object(line: str) -> dict[str, Any] | None:
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def as_number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def as_count(value: object) -> int | None:
    """A count the INTEGER columns can hold; anything else is no count, so
    that a wild report cannot make the attempt unrecordable."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if not 0 <= value <= MAX_COUNT:
        return None
    return int(value)


def as_text(value: object) -> str | None:
    """Cleaned as every child's text is (no NUL, no lone surrogate), so the
    column takes it on SQLite and PostgreSQL alike."""
    if not isinstance(value, str):
        return None
    return clean_text(value, MAX_SESSION_ID) or None
