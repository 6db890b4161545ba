"""Usage limits an agent met, and when they reset, read from what it printed.

What the pinned CLIs print when the API answers 429 (read by running them
against the scripted server, tests/agents):

- Claude Code 2.1.197 (`--output-format json`): a result envelope with
  `"is_error": true`, `"api_error_status": 429` and a `result` such as
  "API Error: Request rejected (429) · ...". It prints no reset time (the
  `retry-after` and `anthropic-ratelimit-unified-reset` headers stay
  inside it), so the pool waits its exponential pause. Older releases said
  "Claude AI usage limit reached|<unix seconds>": that time is read.
- Codex CLI 0.171.0 (`exec --json`): for a `usage_limit_reached` answer an
  `error` and a `turn.failed` event saying "You've hit your usage limit.
  ... try again at 4:52 PM." (the tick's local time; another day's as
  "Dec 29th, 2025 10:15 PM"); for any other 429, "exceeded retry limit,
  last status: 429 Too Many Requests", with no time.
- Any worker: `"limit_reset"` in `$ORCHESTRATOR_USAGE_FILE`, an ISO time
  (UTC when it names no zone) or seconds from now.

Pure: the caller hands in the text, the clock and the local zone.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

# A reset further ahead than this is not believed: the pool's `max_pause`
# has no say over a time the agent named, but a year is nobody's limit.
MAX_RESET = timedelta(days=31)
_LIMIT_WORDS = re.compile(
    r"usage limit|rate limit|rate_limit|too many requests|\b429\b", re.IGNORECASE
)
_PIPE_TIME = re.compile(r"limit reached\|(\d{9,11})")
_IN = re.compile(
    r"try again in\s+(\d+(?:\.\d+)?)\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)\b",
    re.IGNORECASE,
)
_AT = re.compile(
    r"try again at\s+(?:(?P<month>[A-Z][a-z]{2}) (?P<day>\d{1,2})(?:st|nd|rd|th)?, "
    r"(?P<year>\d{4}) )?(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*(?P<ampm>AM|PM)",
    re.IGNORECASE,
)
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


@dataclass(frozen=True)
class UsageLimit:
    """A limit the agent met: what it said, and when it resets (None: it did not say)."""

    reason: str
    reset: datetime | None = None


def limit_in_output(fmt: str, stdout: str, now: datetime, local: tzinfo) -> UsageLimit | None:
    if fmt == "claude-json":
        return _claude(stdout, now)
    if fmt == "codex-jsonl":
        return _codex(stdout, now, local)
    return None


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


def _claude(stdout: str, now: datetime) -> UsageLimit | None:
    envelope = None
    for raw in reversed(stdout.splitlines()):
        line = raw.strip()
        if line.startswith("{"):
            try:
                found = json.loads(line)
            except ValueError:
                continue
            if isinstance(found, dict):
                envelope = found
                break
    if envelope is None or envelope.get("is_error") is not True:
        return None
    text = envelope.get("result")
    text = text if isinstance(text, str) else ""
    status = envelope.get("api_error_status")
    if status != 429 and not _LIMIT_WORDS.search(text):
        return None
    reset = None
    pipe = _PIPE_TIME.search(text)
    if pipe is not None:
        reset = datetime.fromtimestamp(int(pipe.group(1)), UTC)
    else:
        reset = _relative(text, now)
    return UsageLimit(f"Claude Code: {text.strip()[:300] or 'API error 429'}", _sane(reset, now))


def _codex(stdout: str, now: datetime, local: tzinfo) -> UsageLimit | None:
    said: str | None = None
    for raw in stdout.splitlines():
        line = raw.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        if event.get("type") == "turn.completed":
            said = None  # a limit it got past is no limit
        elif event.get("type") in ("error", "turn.failed"):
            error = event.get("error")
            text = error.get("message") if isinstance(error, dict) else event.get("message")
            if isinstance(text, str) and _LIMIT_WORDS.search(text):
                said = text
    if said is None:
        return None
    reset = _absolute(said, now, local) or _relative(said, now)
    return UsageLimit(f"Codex: {said.strip()[:300]}", _sane(reset, now))


def _relative(text: str, now: datetime) -> datetime | None:
    found = _IN.search(text)
    if found is None:
        return None
    amount, unit = float(found.group(1)), found.group(2).lower()
    scale = 3600.0 if unit.startswith("h") else 60.0 if unit.startswith("m") else 1.0
    try:
        return now + timedelta(seconds=amount * scale)
    except (OverflowError, ValueError):  # ages ahead: no time a clock can hold
        return None


def _absolute(text: str, now: datetime, local: tzinfo) -> datetime | None:
    found = _AT.search(text)
    if found is None:
        return None
    hour = int(found.group("hour")) % 12 + (12 if found.group("ampm").upper() == "PM" else 0)
    minute = int(found.group("minute"))
    here = now.astimezone(local)
    try:
        if found.group("month"):
            month = _MONTHS.index(found.group("month").lower()[:3]) + 1
            day = datetime(
                int(found.group("year")), month, int(found.group("day")), hour, minute, tzinfo=local
            )
        else:
            day = here.replace(hour=hour, minute=minute, second=0, microsecond=0)
            if day < here - timedelta(minutes=1):
                day += timedelta(days=1)  # printed as a time of day: the next one
        # Printed to the minute: the limit is over by the end of that minute.
        return (day + timedelta(minutes=1)).astimezone(UTC)
    except (ValueError, OverflowError):  # no such day, or past year 9999
        return None


def _sane(reset: datetime | None, now: datetime) -> datetime | None:
    if reset is None:
        return None
    if reset < now:
        return now
    return None if reset - now > MAX_RESET else reset
