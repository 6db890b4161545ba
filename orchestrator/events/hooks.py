"""`[[hooks]]` in orchestrator.toml: which commands hear about which events.

Standard library only, like the rest of the configuration: a tick that finds
its lock busy reads the config and exits before SQLAlchemy is imported.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.config.schema import (
    Argv,
    Checks,
    Key,
    Number,
    Section,
    Strings,
    Text,
    read_keys,
)
from orchestrator.events.kinds import KINDS

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


_HOOKS = "hooks"
_IN_HOOKS = frozenset({_HOOKS})
# A year at most: the next try's time must be a date the database holds.
_SECONDS = Number(low=0.0, high=MAX_SECONDS, low_inclusive=False)


def parse_hooks(checks: Checks, value: object) -> tuple[HookConfig, ...]:
    """Validated hooks, with every mistake named by its dotted key (exit 78)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        checks.expected("hooks", "an array of tables ([[hooks]])", value)
    hooks: list[HookConfig] = []
    for index, item in enumerate(value):
        key = f"hooks[{index}]"
        table = checks.table(item, key, HOOKS_SECTION.names())
        if "command" not in table:
            checks.fail(f"{key}.command", "missing; the argv list to run for each event")
        if "on" not in table:
            checks.fail(f"{key}.on", f"missing; a list of event kinds: {', '.join(KINDS)}")
        values = HOOKS_SECTION.defaults()
        read_keys(checks, HOOKS_SECTION.keys, table, key, values)
        for position, kind in enumerate(values["on"]):
            if kind not in KINDS:
                checks.fail(
                    f"{key}.on[{position}]", f"unknown event {kind!r}; known: {', '.join(KINDS)}"
                )
        name = values["name"] if values["name"] is not None else " ".join(values["command"])
        hook = HookConfig(**{**values, "name": name[:255]})
        if any(other.name == hook.name for other in hooks):
            checks.fail(f"{key}.name", f"another hook is already named {hook.name!r}")
        hooks.append(hook)
    return tuple(hooks)


HOOKS_SECTION: Section[None] = Section(
    name="hooks",
    table=_HOOKS,
    table_doc="`[[hooks]]`, commands run for events",
    keys=(
        Key(
            "name",
            Text(),
            None,
            "the hook's name in `deliveries.hook`, `events` and the metrics",
            _IN_HOOKS,
            shown="the command joined",
        ),
        Key("on", Strings(), (), "the event kinds it wants", _IN_HOOKS, shown="(required)"),
        Key(
            "command",
            Argv(),
            (),
            "argv list; gets the event as one line of JSON on stdin, runs in the config's "
            "folder; exit 0 means delivered",
            _IN_HOOKS,
            shown="(required)",
        ),
        Key(
            "timeout_seconds",
            _SECONDS,
            DEFAULT_TIMEOUT,
            "a try is killed (its whole process group) past this; at most a year, like the two "
            "below",
            _IN_HOOKS,
        ),
        Key(
            "retry_seconds",
            _SECONDS,
            DEFAULT_RETRY,
            "the first wait after a failed try; doubles...",
            _IN_HOOKS,
        ),
        Key("max_retry_seconds", _SECONDS, DEFAULT_MAX_RETRY, "...up to this", _IN_HOOKS),
    ),
    read_table=parse_hooks,
)
