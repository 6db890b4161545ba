"""The stage keys of best-attempt restore and verifier noise, validated.

Kept apart from the stage reader (long already) and on the standard
library only, like the guards' keys: the busy-lock path loads the config.
"""

from __future__ import annotations

from typing import Any, Literal, NoReturn, Protocol

SELECTION_KEYS = ("on_halt", "verifier_samples")
OnHalt = Literal["last", "best"]
ON_HALT: tuple[str, ...] = ("last", "best")
MAX_SAMPLES = 100  # a verifier run more often than this is a mistake, not a measure


class _Checks(Protocol):
    def fail(self, key: str, problem: str) -> NoReturn: ...
    def integer(self, value: object, key: str, minimum: int) -> int: ...
    def choice(self, value: object, key: str, choices: tuple[str, ...]) -> str: ...


def selection_defaults() -> dict[str, Any]:
    return {"on_halt": "last", "verifier_samples": 1}


def read_selection(checks: _Checks, table: dict[str, Any], key: str, into: dict[str, Any]) -> None:
    """Override `into` with the keys `table` sets (a stage or [defaults])."""

    def sub(name: str) -> str:
        return f"{key}.{name}" if key else name

    if "on_halt" in table:
        into["on_halt"] = checks.choice(table["on_halt"], sub("on_halt"), ON_HALT)
    if "verifier_samples" in table:
        samples = checks.integer(table["verifier_samples"], sub("verifier_samples"), 1)
        if samples > MAX_SAMPLES:
            checks.fail(sub("verifier_samples"), f"at most {MAX_SAMPLES}, not {samples}")
        into["verifier_samples"] = samples
