"""When a usage limit resets, read from the words an agent CLI printed:
the phrases more than one kind's limit detection (`agents.kinds`) reads.

Below the kinds and `agents.limits` (which asks the registry), so a kind's
module reads a reset time without importing the dispatch. Pure: the caller
hands in the text, the clock and the local zone.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo

LIMIT_WORDS = re.compile(
    r"usage limit|rate limit|rate_limit|too many requests|\b429\b", re.IGNORECASE
)
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


def reset_in(text: str, now: datetime) -> datetime | None:
    """A time from now, as in "try again in 5 minutes"."""
    found = _IN.search(text)
    if found is None:
        return None
    amount, unit = float(found.group(1)), found.group(2).lower()
    scale = 3600.0 if unit.startswith("h") else 60.0 if unit.startswith("m") else 1.0
    try:
        return now + timedelta(seconds=amount * scale)
    except (OverflowError, ValueError):  # ages ahead: no time a clock can hold
        return None


def reset_at(text: str, now: datetime, local: tzinfo) -> datetime | None:
    """A time of day, as in "try again at 4:52 PM" (the next such time in
    `local`), or a day's, as in "try again at Dec 29th, 2025 10:15 PM"."""
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
