"""`[pipelines.NAME] on_change`: what a change of the pipeline's version does
to its tasks in flight. Read by the loader through `Feature.config`; kept in
`PipelineConfig.extras["versions"]`, read back with `VERSIONS_SECTION.of`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.config.schema import PIPELINE_ONLY, Choice, Key, Section

ON_CHANGE = ("pin", "upgrade")


@dataclass(frozen=True, slots=True)
class VersionPolicy:
    """`pin`: a task finishes on the version it was added on. `upgrade`: it
    moves to the current version at its next claim when the change is
    compatible, and waits for `migrate` when it is not."""

    on_change: str = "pin"


def _build(values: Mapping[str, Any]) -> VersionPolicy:
    return VersionPolicy(on_change=str(values["on_change"]))


VERSIONS_SECTION: Section[VersionPolicy] = Section(
    name="versions",
    keys=(
        Key(
            "on_change",
            Choice(ON_CHANGE),
            "pin",
            "what an edit of this pipeline does to its tasks in flight: `pin` (each finishes on "
            "the version it was added on) or `upgrade` (it moves to the current version at its "
            "next claim when its stage and the later ones are still there in the same order; "
            "otherwise it waits for `orchestrator migrate`)",
            PIPELINE_ONLY,
        ),
    ),
    build=_build,
    extension=True,
)
