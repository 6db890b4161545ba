"""Usage limits an agent met, and when they reset, read from what it printed.

What each agent CLI prints at a limit is its kind's to read
(`agents.kinds.claude`, `agents.kinds.codex`); here the time it names is
bounded, and the one way every worker can say it is read:

- Any worker: `"limit_reset"` in `$ORCHESTRATOR_USAGE_FILE`, an ISO time
  (UTC when it names no zone) or seconds from now.

Pure: the caller hands in the text, the clock and the local zone.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

from orchestrator.agents import kinds

# A reset further ahead than this is not believed: the pool's `max_pause`
# has no say over a time the agent named, but a year is nobody's limit.
MAX_RESET = timedelta(days=31)


@dataclass(frozen=True)
class UsageLimit:
    """A limit the agent met: what it said, and when it resets (None: it did not say)."""

    reason: str
    reset: datetime | None = None


def limit_in_output(fmt: str, stdout: str, now: datetime, local: tzinfo) -> UsageLimit | None:
    kind = kinds.reading(fmt)
    if kind is None or kind.usage_limit is None:
        return None
    said = kind.usage_limit(stdout, now, local)
    if said is None:
        return None
    reason, reset = said
    return UsageLimit(reason, _sane(reset, now))


def limit_in_report(data: object, now: datetime) -> UsageLimit | None:
    """`limit_reset` in a usage report: an ISO time or seconds from now."""
    if not isinstance(data, dict) or "limit_reset" not in data:
        return None
    value = data["limit_reset"]
    reset: datetime | None = None
    if isinstance(value, bool):
        reset = None
    elif isinstance(value, int | float) and math.isfinite(value):
        try:  # past year 9999 or a timedelta: no time a clock can hold
            reset = now + timedelta(seconds=max(0.0, float(value)))
        except (OverflowError, ValueError):
            reset = None
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            parsed = None
        if parsed is not None:
            reset = parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    return UsageLimit(
        f"the worker reported a usage limit (limit_reset {value!r:.60})", _sane(reset, now)
    )


def read_report_limit(raw: bytes, now: datetime) -> UsageLimit | None:
    try:
        return limit_in_report(json.loads(raw), now)
    except (ValueError, RecursionError):  # the worker's file: nested past reading is no report
        return None


def _sane(reset: datetime | None, now: datetime) -> datetime | None:
    if reset is None:
        return None
    if reset < now:
        return now
    return None if reset - now > MAX_RESET else reset
