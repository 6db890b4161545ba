"""The pipeline keys of landing, validated: `land`, `land_check`,
`land_to`, `land_timeout`, `remote`.

Kept apart from `config` and, like the guards' keys, on the standard
library only (the busy-lock path loads the config).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, Protocol

from orchestrator.domain.pipeline import land_to_stage

LandMode = Literal["merge", "pr", "none"]
LAND_MODES: tuple[LandMode, ...] = ("merge", "pr", "none")
LAND_KEYS = ("land", "land_check", "land_to", "land_timeout", "remote")
DEFAULT_LAND_TIMEOUT = 600.0


@dataclass(frozen=True, slots=True)
class LandConfig:
    """How a pipeline lands a task once its last stage passed; `mode`
    "none" (the default) finishes the task there, as before landing was."""

    mode: LandMode = "none"
    check: tuple[str, ...] | None = None  # run in the worktree on the rebased tip
    to: str | None = None  # where a conflict or a failing check sends the task
    timeout: float = DEFAULT_LAND_TIMEOUT  # the check's, and each git step's bound
    remote: str = "origin"  # where `pr` pushes

    @property
    def lands(self) -> bool:
        return self.mode != "none"


class _Checks(Protocol):
    """The part of config's loader landing uses (for its error format)."""

    def fail(self, key: str, problem: str) -> NoReturn: ...
    def string(self, value: object, key: str) -> str: ...
    def choice(self, value: object, key: str, choices: tuple[str, ...]) -> str: ...
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


def read_land_keys(
    loader: _Checks, table: dict[str, Any], key: str, stages: Sequence[tuple[str, bool]]
) -> LandConfig:
    """The landing keys of one pipeline table (`key` its dotted name);
    `stages` is (name, gated) in order, for `land_to`."""

    def dotted(name: str) -> str:
        return f"{key}.{name}"

    mode: LandMode = "none"
    if "land" in table:
        chosen = loader.choice(table["land"], dotted("land"), LAND_MODES)
        mode = "merge" if chosen == "merge" else "pr" if chosen == "pr" else "none"
    if mode != "none" and "repository" not in table:
        loader.fail(dotted("land"), f"land = {mode!r} needs `repository` in the same pipeline")
    found: dict[str, Any] = {"mode": mode}
    if "land_check" in table:
        found["check"] = loader.argv(table["land_check"], dotted("land_check"))
    named = None if "land_to" not in table else loader.string(table["land_to"], dotted("land_to"))
    to = land_to_stage(stages, named)
    if named is not None and to is None:
        listed = ", ".join(name for name, _gated in stages)
        loader.fail(dotted("land_to"), f"no stage {named!r} in this pipeline; one of: {listed}")
    if mode != "none" and to is None:
        loader.fail(
            dotted("land"),
            "a landing needs a stage to send a conflict back to: set `land_to`, or have a "
            "stage without a gate",
        )
    found["to"] = to
    if "land_timeout" in table:
        found["timeout"] = loader.number(
            table["land_timeout"], dotted("land_timeout"), low=0, high=86400, low_inclusive=False
        )
    if "remote" in table:
        remote = loader.string(table["remote"], dotted("remote"))
        if remote.startswith("-") or any(c.isspace() for c in remote):
            loader.fail(dotted("remote"), f"{remote!r} is not a remote name")
        found["remote"] = remote
    return LandConfig(**found)
