"""The sandbox keys of a stage, a pipeline or `[defaults]`: `sandbox`,
`sandbox_ro`, `sandbox_rw`, `sandbox_network`, `sandbox_tmp_mb`, and the
agent-session key `resume` (a stage's or `[defaults]`'). Read like
the other stage keys, kept here so the config readers only call in
(`runner.sandbox` builds the argv)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NoReturn, Protocol

SandboxMode = Literal["none", "bwrap"]
SANDBOX_MODES: tuple[SandboxMode, ...] = ("none", "bwrap")
SANDBOX_KEYS = ("sandbox", "sandbox_ro", "sandbox_rw", "sandbox_network", "sandbox_tmp_mb")
STAGE_ONLY_KEYS = ("resume",)
SANDBOX_DEFAULTS: dict[str, Any] = {
    "sandbox": "none",
    "sandbox_ro": (),
    "sandbox_rw": (),
    "sandbox_network": True,
    "sandbox_tmp_mb": 1024,
    "resume": False,
}


@dataclass(frozen=True, slots=True)
class SandboxConfig:
    """Where a command runs: on the host (`none`) or inside bubblewrap.

    `ro` and `rw` are paths as written (`~` is the tick's home, a relative
    path the config's folder), expanded when the command starts."""

    mode: SandboxMode = "none"
    ro: tuple[str, ...] = ()
    rw: tuple[str, ...] = ()
    network: bool = True
    tmp_mb: int = 1024

    @property
    def enabled(self) -> bool:
        return self.mode != "none"


class _Reader(Protocol):
    def fail(self, key: str, problem: str) -> NoReturn: ...
    def choice(self, value: object, key: str, choices: tuple[str, ...]) -> str: ...
    def boolean(self, value: object, key: str) -> bool: ...
    def integer(self, value: object, key: str, minimum: int) -> int: ...
    def string_list(self, value: object, key: str) -> tuple[str, ...]: ...


def sandbox_settings(reader: _Reader, table: dict[str, Any], key: str) -> dict[str, Any]:
    """The sandbox keys `table` sets, checked; the caller folds them over
    what it inherits (a stage over its pipeline over `[defaults]`)."""
    found: dict[str, Any] = {}
    if "sandbox" in table:
        found["sandbox"] = reader.choice(table["sandbox"], f"{key}.sandbox", SANDBOX_MODES)
    for name in ("sandbox_ro", "sandbox_rw"):
        if name in table:
            paths = reader.string_list(table[name], f"{key}.{name}")
            for index, path in enumerate(paths):
                if not path or "\0" in path:
                    reader.fail(f"{key}.{name}[{index}]", "an empty path maps nothing")
            found[name] = paths
    if "sandbox_network" in table:
        found["sandbox_network"] = reader.boolean(
            table["sandbox_network"], f"{key}.sandbox_network"
        )
    if "sandbox_tmp_mb" in table:
        found["sandbox_tmp_mb"] = reader.integer(
            table["sandbox_tmp_mb"], f"{key}.sandbox_tmp_mb", 1
        )
    if "resume" in table:
        found["resume"] = reader.boolean(table["resume"], f"{key}.resume")
    return found


def sandbox_of(merged: dict[str, Any]) -> SandboxConfig:
    return SandboxConfig(
        mode=merged["sandbox"],
        ro=tuple(merged["sandbox_ro"]),
        rw=tuple(merged["sandbox_rw"]),
        network=merged["sandbox_network"],
        tmp_mb=merged["sandbox_tmp_mb"],
    )
