"""`[pools.NAME]`: agents that share an account share its limits.

A stage names its pool (`pool = "NAME"`); the pool caps how many of its
attempts run at once on every host (`max_running`), what its attempts may
spend in a UTC day (`max_usd_per_day`), and how long a usage limit with no
reset time pauses it at most (`max_pause`). Standard library only, like the
rest of the config reader.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

from orchestrator.domain.slug import slug_problem

POOL_KEYS = ("max_running", "max_usd_per_day", "max_pause")
# The first wait of a limit that named no reset time; each one in a row doubles it.
FIRST_PAUSE = 60.0
DEFAULT_MAX_PAUSE = 3600.0


@dataclass(frozen=True, slots=True)
class PoolConfig:
    name: str
    max_running: int | None = None
    max_usd_per_day: float | None = None
    max_pause: float = DEFAULT_MAX_PAUSE

    def pause_for(self, streak: int) -> float:
        """The wait of the `streak`-th limit in a row that named no reset time."""
        return min(FIRST_PAUSE * 2.0 ** max(0, streak - 1), self.max_pause)


class _Reader(Protocol):
    def fail(self, key: str, problem: str) -> NoReturn: ...

    def expected(self, key: str, what: str, value: object) -> NoReturn: ...

    def table(self, value: object, key: str, allowed: tuple[str, ...]) -> dict[str, Any]: ...

    def integer(self, value: object, key: str, minimum: int) -> int: ...

    def number(
        self,
        value: object,
        key: str,
        *,
        low: float,
        high: float | None = None,
        low_inclusive: bool = True,
    ) -> float: ...

    def string(self, value: object, key: str) -> str: ...


def read_pools(reader: _Reader, value: object) -> dict[str, PoolConfig]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        reader.expected("pools", "a table of pools ([pools.NAME])", value)
    found: dict[str, PoolConfig] = {}
    for name, body in value.items():
        key = f"pools.{name}"
        problem = slug_problem(name)
        if problem is not None:
            reader.fail(key, f"pool name: {problem}")
        table = reader.table(body, key, POOL_KEYS)
        found[name] = PoolConfig(
            name=name,
            max_running=None
            if "max_running" not in table
            else reader.integer(table["max_running"], f"{key}.max_running", 1),
            max_usd_per_day=None
            if "max_usd_per_day" not in table
            else reader.number(
                table["max_usd_per_day"], f"{key}.max_usd_per_day", low=0.0, low_inclusive=False
            ),
            max_pause=DEFAULT_MAX_PAUSE
            if "max_pause" not in table
            else reader.number(
                table["max_pause"], f"{key}.max_pause", low=0.0, low_inclusive=False
            ),
        )
    return found


def read_pool_ref(reader: _Reader, value: object, key: str, known: frozenset[str]) -> str:
    """A stage's `pool`: the name of a `[pools.NAME]` table (a typo would
    silently run the stage uncapped)."""
    name = reader.string(value, key)
    if name not in known:
        have = ", ".join(sorted(known)) or "none"
        reader.fail(key, f"unknown pool {name!r} (add a [pools.{name}] table; pools: {have})")
    return name
