"""The pipeline keys of landing, declared: `land`, `land_check`,
`land_to`, `land_timeout`, `max_land_sendbacks`, `land_secrets`, `remote`.

Declared by landing, read by the config's generic reader; like the
guards' keys, on the standard library only (the busy-lock path loads the
config).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from orchestrator.config.schema import (
    PIPELINE_ONLY,
    Argv,
    Checked,
    Checks,
    Choice,
    Integer,
    Key,
    Number,
    Section,
    Strings,
    Text,
)
from orchestrator.domain.pipeline import land_to_stage

LandMode = Literal["merge", "pr", "none"]
LAND_MODES: tuple[LandMode, ...] = ("merge", "pr", "none")
DEFAULT_LAND_TIMEOUT = 600.0
DEFAULT_MAX_LAND_SENDBACKS = 3


@dataclass(frozen=True, slots=True)
class LandConfig:
    """How a pipeline lands a task once its last stage passed; `mode`
    "none" (the default) finishes the task there, as before landing was."""

    mode: LandMode = "none"
    check: tuple[str, ...] | None = None  # run in the worktree on the rebased tip
    to: str | None = None  # where a conflict or a failing check sends the task
    timeout: float = DEFAULT_LAND_TIMEOUT  # the check's, and each git step's bound
    remote: str = "origin"  # where `pr` pushes
    # Send-backs a task may take since it was added or last resumed; the
    # landing failing once more halts it `land_failed` (each send-back
    # starts a new run, so `max_attempts` alone never bounds them).
    max_sendbacks: int = DEFAULT_MAX_LAND_SENDBACKS
    # Secrets the landing is given (`gh`'s GH_TOKEN) whatever the stages'
    # `secrets` list: a name a stage lists is kept from every other child.
    secrets: tuple[str, ...] = ()

    @property
    def lands(self) -> bool:
        return self.mode != "none"


def _remote_name(checks: Checks, remote: str, key: str) -> None:
    if remote.startswith("-") or any(c.isspace() for c in remote):
        checks.fail(key, f"{remote!r} is not a remote name")


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _secret_names(checks: Checks, names: tuple[str, ...], key: str) -> None:
    for index, name in enumerate(names):
        if not _NAME.fullmatch(name) or name.startswith("ORCHESTRATOR_"):
            checks.fail(f"{key}[{index}]", f"{name!r} is not a variable name the landing may get")


def _stages(values: Mapping[str, Any]) -> tuple[tuple[str, bool], ...]:
    """(name, gated) of the pipeline's stages, in order, for `land_to`."""
    return tuple((stage.name, stage.gate) for stage in values["stages"])


def _check(checks: Checks, values: dict[str, Any], key: str) -> None:
    """The rules that span keys: a landing needs a repository and a stage to go back to."""
    mode = values["land"]
    if mode != "none" and values["repository"] is None:
        checks.fail(f"{key}.land", f"land = {mode!r} needs `repository` in the same pipeline")
    stages = _stages(values)
    named = values["land_to"]
    to = land_to_stage(stages, named)
    if named is not None and to is None:
        listed = ", ".join(name for name, _gated in stages)
        checks.fail(f"{key}.land_to", f"no stage {named!r} in this pipeline; one of: {listed}")
    if mode != "none" and to is None:
        checks.fail(
            f"{key}.land",
            "a landing needs a stage to send a conflict back to: set `land_to`, or have a "
            "stage without a gate",
        )


def _build(values: Mapping[str, Any]) -> LandConfig:
    chosen = values["land"]
    mode: LandMode = "merge" if chosen == "merge" else "pr" if chosen == "pr" else "none"
    return LandConfig(
        mode=mode,
        check=values["land_check"],
        to=land_to_stage(_stages(values), values["land_to"]),
        timeout=values["land_timeout"],
        remote=values["remote"],
        max_sendbacks=values["max_land_sendbacks"],
        secrets=values["land_secrets"],
    )


LAND_SECTION: Section[LandConfig] = Section(
    name="landing",
    keys=(
        Key(
            "land",
            Choice(LAND_MODES),
            "none",
            'what happens once the last stage passes: `"none"` (default: the task is '
            '`complete`), `"merge"` (the task is `landing`: rebased onto the base branch\'s '
            "tip, `land_check` run, the base branch moved there; [landing](../how-to/landing.md)) "
            'or `"pr"` (pushed to `remote`, a pull request opened); anything but `none` needs '
            "`repository` (else exit 78)",
            PIPELINE_ONLY,
        ),
        Key(
            "land_check",
            Argv(),
            None,
            "argv run in the task's worktree on the rebased tip before the base branch moves "
            "(`merge`); a non-zero exit sends the task back to `land_to` with its output's tail "
            "as the hint. Default: no check",
            PIPELINE_ONLY,
        ),
        Key(
            "land_to",
            Text(),
            None,
            "the stage a conflict or a failing check sends the task back to (default: the "
            "pipeline's `implement`, else its first stage without a gate)",
            PIPELINE_ONLY,
        ),
        Key(
            "land_timeout",
            Number(low=0, high=86400, low_inclusive=False),
            DEFAULT_LAND_TIMEOUT,
            "seconds (above 0, at most 86400) `land_check` may run, and the bound of the "
            "landing's git steps before it and again after it (default 600); the repository's "
            "landing lock is leased for three times this plus a minute",
            PIPELINE_ONLY,
        ),
        Key(
            "max_land_sendbacks",
            Integer(0, 1000),
            DEFAULT_MAX_LAND_SENDBACKS,
            "how many times (0 to 1000) the landing may send a task back (a conflict, a "
            "failing `land_check`) since it was added or last resumed; the next landing that "
            "would send it back halts it `land_failed` instead, with the conflict or the "
            "check's output as the reason (default 3)",
            PIPELINE_ONLY,
        ),
        Key(
            "land_secrets",
            Checked(Strings(), _secret_names),
            (),
            "environment variable names the landing is given (its `land_check`, `git push`, "
            '`gh`: `["GH_TOKEN"]`) from the tick\'s environment or `env_file`, even when a '
            "stage lists them in `secrets` (which keeps them from every other command)",
            PIPELINE_ONLY,
        ),
        Key(
            "remote",
            Checked(Text(), _remote_name),
            "origin",
            'the git remote `land = "pr"` pushes to (default `origin`)',
            PIPELINE_ONLY,
        ),
    ),
    build=_build,
    field="landing",
    check=_check,
)
