"""`[pools.NAME]`: agents that share an account share its limits.

A stage names its pool (`pool = "NAME"`); the pool caps how many of its
attempts run at once on every host (`max_running`), what its attempts may
spend in a UTC day (`max_usd_per_day`), and how long a usage limit with no
reset time pauses it at most (`max_pause`). Standard library only, like the
rest of the config reader.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass

from orchestrator.config.schema import (
    STAGE_KEY,
    Checks,
    Integer,
    Key,
    Named,
    Number,
    Section,
    read_keys,
)
from orchestrator.domain.slug import slug_problem

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


def read_pools(checks: Checks, value: object) -> Mapping[str, PoolConfig]:
    if value is None:
        return types.MappingProxyType({})
    if not isinstance(value, dict):
        checks.expected("pools", "a table of pools ([pools.NAME])", value)
    found: dict[str, PoolConfig] = {}
    for name, body in value.items():
        key = f"pools.{name}"
        problem = slug_problem(name)
        if problem is not None:
            checks.fail(key, f"pool name: {problem}")
        table = checks.table(body, key, POOLS_SECTION.names(_POOLS))
        values = POOLS_SECTION.defaults(_POOLS)
        read_keys(checks, POOLS_SECTION.keys, table, key, values)
        found[name] = PoolConfig(name=name, **values)
    return types.MappingProxyType(found)


_POOLS = "pools"
_IN_POOLS = frozenset({_POOLS})
POOLS_SECTION: Section[None] = Section(
    name="pools",
    table=_POOLS,
    table_doc="`[pools.NAME]`, one per agent pool: caps and pauses its stages share",
    keys=(
        Key(
            "max_running",
            Integer(1),
            None,
            "an integer ≥ 1: open attempts of the pool's stages, counted on every host in the "
            "claim's own transaction",
            _IN_POOLS,
            shown="(no cap)",
        ),
        Key(
            "max_usd_per_day",
            Number(low=0.0, low_inclusive=False),
            None,
            "US dollars > 0: the recorded `cost_usd` of the pool's attempts that finished since "
            "midnight UTC; at or past it the pool claims nothing more until the next UTC day",
            _IN_POOLS,
            shown="(no cap)",
        ),
        Key(
            "max_pause",
            Number(low=0.0, low_inclusive=False),
            DEFAULT_MAX_PAUSE,
            "seconds > 0: a usage limit without a reset time pauses the pool 60 s, doubling "
            "with each such limit in a row, at most this long",
            _IN_POOLS,
        ),
        Key(
            "pool",
            Named(_POOLS, "pool"),
            None,
            "the [`[pools.NAME]`](#poolsname) whose cap, daily spend and usage-limit pauses the "
            "stage's attempts share; a name with no such table is a config error (78)",
            STAGE_KEY,
        ),
    ),
    read_table=read_pools,
)
