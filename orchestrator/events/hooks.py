"""`[[hooks]]` in orchestrator.toml: which commands hear about which events.

Standard library only, like the rest of the configuration: a tick that finds
its lock busy reads the config and exits before SQLAlchemy is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from orchestrator.domain.event_kinds import KINDS

HOOK_KEYS = ("name", "on", "command", "timeout_seconds", "retry_seconds", "max_retry_seconds")
DEFAULT_TIMEOUT = 30.0
DEFAULT_RETRY = 30.0
DEFAULT_MAX_RETRY = 3600.0
MAX_SECONDS = 31_536_000.0  # a year


@dataclass(frozen=True)
class HookConfig:
    """A command run with one event as JSON on its stdin.

    `name` identifies its deliveries in the database: renaming a hook (or,
    without a name, changing its command) makes it a new hook."""

    name: str
    on: tuple[str, ...]
    command: tuple[str, ...]
    timeout_seconds: float = DEFAULT_TIMEOUT
    retry_seconds: float = DEFAULT_RETRY  # the first wait after a failure
    max_retry_seconds: float = DEFAULT_MAX_RETRY  # the cap on the doubling waits

    def wants(self, kind: str) -> bool:
        return kind in self.on

    def backoff(self, tries: int) -> float:
        """Seconds to wait after the `tries`-th failed try: doubling, capped.

        The cap comes first: past 1,024 tries `2 ** (tries - 1)` no longer
        fits a float, and a hook down for a week gets there."""
        wait = self.retry_seconds
        for _ in range(max(tries - 1, 0)):
            if wait >= self.max_retry_seconds:
                break
            wait *= 2  # at most ~2,100 doublings from the smallest float to the cap
        return min(wait, self.max_retry_seconds)


class _Loader(Protocol):
    def fail(self, key: str, problem: str) -> Any: ...
    def expected(self, key: str, what: str, value: object) -> Any: ...
    def table(self, value: object, key: str, allowed: tuple[str, ...]) -> dict[str, Any]: ...
    def string(self, value: object, key: str) -> str: ...
    def string_list(self, value: object, key: str) -> tuple[str, ...]: ...
    def argv(self, value: object, key: str) -> tuple[str, ...]: ...
    def number(
        self,
        value: object,
        key: str,
        *,
        low: float,
        high: float | None = None,
        low_inclusive: bool = True,
    ) -> float: ...


def parse_hooks(loader: _Loader, value: object) -> tuple[HookConfig, ...]:
    """Validated hooks, with every mistake named by its dotted key (exit 78)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        loader.expected("hooks", "an array of tables ([[hooks]])", value)
        return ()
    hooks: list[HookConfig] = []
    for index, item in enumerate(value):
        key = f"hooks[{index}]"
        table = loader.table(item, key, HOOK_KEYS)
        if "command" not in table:
            loader.fail(f"{key}.command", "missing; the argv list to run for each event")
        if "on" not in table:
            loader.fail(f"{key}.on", f"missing; a list of event kinds: {', '.join(KINDS)}")
        command = loader.argv(table["command"], f"{key}.command")
        on = loader.string_list(table["on"], f"{key}.on")
        for position, kind in enumerate(on):
            if kind not in KINDS:
                loader.fail(
                    f"{key}.on[{position}]", f"unknown event {kind!r}; known: {', '.join(KINDS)}"
                )
        name = (
            loader.string(table["name"], f"{key}.name")
            if "name" in table
            else " ".join(command)[:255]
        )

        def num(
            field: str, default: float, *, key: str = key, table: dict[str, Any] = table
        ) -> float:
            if field not in table:
                return default
            # A year at most: the next try's time must be a date the database holds.
            return loader.number(
                table[field], f"{key}.{field}", low=0.0, high=MAX_SECONDS, low_inclusive=False
            )

        hook = HookConfig(
            name=name[:255],
            on=on,
            command=command,
            timeout_seconds=num("timeout_seconds", DEFAULT_TIMEOUT),
            retry_seconds=num("retry_seconds", DEFAULT_RETRY),
            max_retry_seconds=num("max_retry_seconds", DEFAULT_MAX_RETRY),
        )
        if any(other.name == hook.name for other in hooks):
            loader.fail(f"{key}.name", f"another hook is already named {hook.name!r}")
        hooks.append(hook)
    return tuple(hooks)
