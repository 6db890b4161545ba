"""The stage keys of the agent runtime, read like every other stage key
(and each may sit in `[defaults]`): `output`, `verifier_output`,
`max_cost_usd`, `secrets`. Kept here so `config.py` only calls in."""

from __future__ import annotations

import re
from typing import Any, NoReturn, Protocol

from orchestrator.agents.output import OUTPUT_FORMATS

AGENT_KEYS = ("output", "verifier_output", "max_cost_usd", "secrets")
AGENT_DEFAULTS: dict[str, Any] = {
    "output": "text",
    "verifier_output": "text",
    "max_cost_usd": None,
    "secrets": (),
}
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Reader(Protocol):
    def fail(self, key: str, problem: str) -> NoReturn: ...

    def choice(self, value: object, key: str, choices: tuple[str, ...]) -> str: ...

    def number(
        self,
        value: object,
        key: str,
        *,
        low: float,
        high: float | None = None,
        low_inclusive: bool = True,
    ) -> float: ...

    def string_list(self, value: object, key: str) -> tuple[str, ...]: ...


def agent_settings(reader: _Reader, table: dict[str, Any], key: str) -> dict[str, Any]:
    """The agent keys `table` sets, checked; the caller folds them over its defaults."""
    found: dict[str, Any] = {}
    for name in ("output", "verifier_output"):
        if name in table:
            found[name] = reader.choice(table[name], f"{key}.{name}", OUTPUT_FORMATS)
    if "max_cost_usd" in table:
        found["max_cost_usd"] = reader.number(
            table["max_cost_usd"], f"{key}.max_cost_usd", low=0.0, low_inclusive=False
        )
    if "secrets" in table:
        names = reader.string_list(table["secrets"], f"{key}.secrets")
        for index, name in enumerate(names):
            if not _ENV_NAME.fullmatch(name) or name.startswith("ORCHESTRATOR_"):
                reader.fail(
                    f"{key}.secrets[{index}]",
                    f"{name!r} is not an environment variable name a stage may receive",
                )
        found["secrets"] = names
    return found
