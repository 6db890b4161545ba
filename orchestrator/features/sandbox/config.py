"""The sandbox keys of a stage, a pipeline or `[defaults]`: `sandbox`,
`sandbox_ro`, `sandbox_rw`, `sandbox_network`, `sandbox_tmp_mb`. Owned by
the sandbox feature, read by the config's generic reader like every other
key (the config loader is handed `SANDBOX_SECTION` by `config.sections`).
Standard library and `config.schema` only: every config load imports it,
sandboxed or not, so nothing of the walls (`walls.py`, `bwrap.py`) is
imported from here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from orchestrator.config.schema import (
    INHERITED,
    Bool,
    Checked,
    Checks,
    Choice,
    Integer,
    Key,
    Section,
    Strings,
)

SandboxMode = Literal["none", "bwrap"]
SANDBOX_MODES: tuple[SandboxMode, ...] = ("none", "bwrap")


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


def sandbox_of(merged: Mapping[str, Any]) -> SandboxConfig:
    return SandboxConfig(
        mode=merged["sandbox"],
        ro=tuple(merged["sandbox_ro"]),
        rw=tuple(merged["sandbox_rw"]),
        network=merged["sandbox_network"],
        tmp_mb=merged["sandbox_tmp_mb"],
    )


def _mappable(checks: Checks, paths: tuple[str, ...], key: str) -> None:
    for index, path in enumerate(paths):
        if not path or "\0" in path:
            checks.fail(f"{key}[{index}]", "an empty path maps nothing")


_AS_IN_A_STAGE = "as in a stage, for `setup` and the stages that do not set it"
SANDBOX_SECTION: Section[SandboxConfig] = Section(
    name="sandbox",
    keys=(
        Key(
            "sandbox",
            Choice(SANDBOX_MODES),
            "none",
            '`"bwrap"` runs the stage\'s worker and verifier inside bubblewrap: the system '
            "read-only, the worktree and the attempt's state folder writable, the home hidden, "
            "a private `/tmp`, a new pid namespace ([sandbox](../how-to/sandbox.md)); `doctor` "
            "checks that it runs here",
            INHERITED,
            pipeline_doc="as in a stage (below): where `setup` runs, and what the pipeline's "
            "stages inherit unless they set their own (over `[defaults]`)",
        ),
        Key(
            "sandbox_ro",
            Checked(Strings(), _mappable),
            (),
            "paths seen read-only inside the sandbox (`~` is the tick's home, a relative path "
            "the config's folder); a missing one is skipped",
            INHERITED,
            pipeline_doc=_AS_IN_A_STAGE,
        ),
        Key(
            "sandbox_rw",
            Checked(Strings(), _mappable),
            (),
            "paths seen writable inside the sandbox (an agent's config folder, a package cache)",
            INHERITED,
            pipeline_doc=_AS_IN_A_STAGE,
        ),
        Key(
            "sandbox_network",
            Bool(),
            True,
            "`false` gives the sandbox no network (a namespace of its own, loopback only)",
            INHERITED,
            pipeline_doc=_AS_IN_A_STAGE,
        ),
        Key(
            "sandbox_tmp_mb",
            Integer(1),
            1024,
            "the size of the sandbox's private `/tmp` (and of the tmpfs over the home), in "
            'MiB: a full one says "No space left on device", the host\'s memory is not spent',
            INHERITED,
            pipeline_doc=_AS_IN_A_STAGE,
        ),
    ),
    build=sandbox_of,
    field="sandbox",
)
