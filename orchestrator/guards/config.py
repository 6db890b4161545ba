"""The stage keys of the runaway guards and strict verdicts, declared.

Declared here, by the guards that read them, and, like the config reader,
on the standard library only: the busy-lock path loads the config.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from orchestrator.config.schema import (
    STAGE_KEY,
    Bool,
    Checks,
    Integer,
    Key,
    Nested,
    Number,
    Seconds,
    Section,
)
from orchestrator.domain.backoff import MAX_BACKOFF, Backoff

# How long a run of pending verdicts may wait, by default (an hour: longer
# than most CI runs, short enough that a stuck check is seen the same day).
DEFAULT_PENDING_TIMEOUT = 3600.0


@dataclass(frozen=True)
class _ExitCodes:
    """Exit statuses 1-255 (0 is success, never a reason to wait)."""

    def read(self, checks: Checks, value: object, key: str, inherited: Any) -> frozenset[int]:
        what = "a list of exit statuses (integers 1-255)"
        if not isinstance(value, list):
            checks.expected(key, what, value)
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= 255:
                checks.expected(key, what, value)
        return frozenset(value)


def _backoff_check(checks: Checks, values: dict[str, Any], key: str) -> None:
    if values["max"] < values["initial"]:
        checks.fail(key, f"max ({values['max']:g}) is less than initial ({values['initial']:g})")


_BACKOFF = frozenset({"backoff"})
_A_YEAR = Seconds(MAX_BACKOFF, "a year")
BACKOFF_SECTION: Section[Backoff] = Section(
    name="guards",
    table="backoff",
    keys=(
        Key(
            "initial",
            _A_YEAR,
            60.0,
            "the first wait, seconds from 0 to a year (31536000)",
            _BACKOFF,
        ),
        Key("factor", Number(low=1.0), 2.0, "growth per wait in a row", _BACKOFF),
        Key("max", _A_YEAR, 3600.0, "the longest wait, seconds from 0 to a year", _BACKOFF),
        Key(
            "tries",
            Integer(1),
            5,
            "after this many waits in a row the exit is an ordinary `worker_error`",
            _BACKOFF,
        ),
    ),
    build=lambda values: Backoff(**values),
    check=_backoff_check,
)

GUARD_SECTION: Section[None] = Section(
    name="guards",
    keys=(
        Key(
            "strict_verdict",
            Bool(),
            False,
            '`true`: a `pass` that is not a JSON bool or the string `"true"`/`"false"` (any '
            "case) makes the attempt `invalid_verdict` instead of being read leniently "
            '(`"no"`, `"0"`, `1` would otherwise pass a gate)',
            STAGE_KEY,
        ),
        Key(
            "halt_after_no_change",
            Integer(1),
            None,
            "halt as `no_progress` after this many attempts in a row (integer ≥ 1) whose "
            "worker left the workspace as it was "
            "([runaway guards](../explanation/verdicts-and-plateau.md#runaway-guards))",
            STAGE_KEY,
            shown="(off)",
        ),
        Key(
            "retry_exit_codes",
            _ExitCodes(),
            frozenset(),
            'worker exit statuses (1-255) that mean "try again later" (rate limited, flaky): '
            "the attempt is a `backoff`, spends nothing, and the task waits",
            STAGE_KEY,
        ),
        Key(
            "backoff",
            Nested(BACKOFF_SECTION, asdict),
            Backoff(),
            "the wait after a retry exit code; keys below",
            STAGE_KEY,
            shown="`{ initial = 60, factor = 2, max = 3600, tries = 5 }`",
        ),
        Key(
            "pending_timeout",
            _A_YEAR,
            DEFAULT_PENDING_TIMEOUT,
            "seconds (0 to a year) a run of "
            "[pending verdicts](../explanation/verdicts-and-plateau.md#verdicts-that-wait) may "
            "last, from its first pending attempt; the first pending verdict after it is "
            "recorded `failed` and spends an attempt",
            STAGE_KEY,
        ),
    ),
)
