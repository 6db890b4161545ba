"""The stage keys of the runaway guards and strict verdicts, validated.

Kept apart from `config` (which is long already) and, like it, on the
standard library only: the busy-lock path loads the config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

GUARD_KEYS = (
    "strict_verdict",
    "halt_after_no_change",
    "retry_exit_codes",
    "backoff",
    "pending_timeout",
)
# How long a run of pending verdicts may wait, by default (an hour: longer
# than most CI runs, short enough that a stuck check is seen the same day).
DEFAULT_PENDING_TIMEOUT = 3600.0
_BACKOFF_KEYS = ("initial", "factor", "max", "tries")
# The longest wait (a year, in seconds): beyond it a wait means "never"
# (which `halt` says better), and past ~1e13 s the time it ends cannot be
# represented, so the attempt could not be recorded at all.
MAX_BACKOFF = 365 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long a worker that exited with a retry exit code waits, and how often.

    The wait before try n (1-based) is `initial * factor**(n-1)`, at most
    `max` seconds (and never more than a year, whatever built it); after
    `tries` waits in a row the next such exit is an ordinary `worker_error`,
    which spends an attempt.
    """

    initial: float = 60.0
    factor: float = 2.0
    max: float = 3600.0
    tries: int = 5

    def delay(self, waits_before: int) -> float:
        """The wait after `waits_before` earlier waits in a row."""
        try:
            wait = float(min(self.max, self.initial * self.factor**waits_before))
        except OverflowError:
            wait = self.max
        return min(wait, MAX_BACKOFF)


class _Checks(Protocol):
    """The part of config's loader the guards use (for its error format)."""

    def fail(self, key: str, problem: str) -> NoReturn: ...
    def table(self, value: object, key: str, allowed: tuple[str, ...]) -> dict[str, Any]: ...
    def integer(self, value: object, key: str, minimum: int) -> int: ...
    def boolean(self, value: object, key: str) -> bool: ...
    def number(
        self,
        value: object,
        key: str,
        *,
        low: float,
        high: float | None = None,
        low_inclusive: bool = True,
    ) -> float: ...
    def expected(self, key: str, what: str, value: object) -> NoReturn: ...


def guard_defaults() -> dict[str, Any]:
    return {
        "strict_verdict": False,
        "halt_after_no_change": None,
        "retry_exit_codes": frozenset(),
        "backoff": Backoff(),
        "pending_timeout": DEFAULT_PENDING_TIMEOUT,
    }


def read_guards(checks: _Checks, table: dict[str, Any], key: str, into: dict[str, Any]) -> None:
    """Override `into` with the guard keys `table` sets (a stage or [defaults])."""

    def sub(name: str) -> str:
        return f"{key}.{name}" if key else name

    if "strict_verdict" in table:
        into["strict_verdict"] = checks.boolean(table["strict_verdict"], sub("strict_verdict"))
    if "halt_after_no_change" in table:
        into["halt_after_no_change"] = checks.integer(
            table["halt_after_no_change"], sub("halt_after_no_change"), 1
        )
    if "retry_exit_codes" in table:
        value = table["retry_exit_codes"]
        what = "a list of exit statuses (integers 1-255)"
        if not isinstance(value, list):
            checks.expected(sub("retry_exit_codes"), what, value)
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= 255:
                checks.expected(sub("retry_exit_codes"), what, value)
        into["retry_exit_codes"] = frozenset(value)
    if "backoff" in table:
        into["backoff"] = _backoff(checks, table["backoff"], sub("backoff"), into["backoff"])
    if "pending_timeout" in table:
        into["pending_timeout"] = _seconds(checks, table["pending_timeout"], sub("pending_timeout"))


def _backoff(checks: _Checks, value: object, key: str, base: Backoff) -> Backoff:
    """Key by key over `base`, as the plateau table is."""
    raw = checks.table(value, key, _BACKOFF_KEYS)
    initial, factor, most, tries = base.initial, base.factor, base.max, base.tries
    if "initial" in raw:
        initial = _seconds(checks, raw["initial"], f"{key}.initial")
    if "factor" in raw:
        factor = checks.number(raw["factor"], f"{key}.factor", low=1.0)
    if "max" in raw:
        most = _seconds(checks, raw["max"], f"{key}.max")
    if "tries" in raw:
        tries = checks.integer(raw["tries"], f"{key}.tries", 1)
    if most < initial:
        checks.fail(key, f"max ({most:g}) is less than initial ({initial:g})")
    return Backoff(initial=initial, factor=factor, max=most, tries=tries)


def _seconds(checks: _Checks, value: object, key: str) -> float:
    """A wait in seconds, from 0 to a year (`MAX_BACKOFF`)."""
    seconds = checks.number(value, key, low=0.0)
    if seconds > MAX_BACKOFF:
        checks.fail(key, f"{seconds:g} seconds is more than a year ({MAX_BACKOFF:.0f})")
    return seconds
