"""The notes feature's one stage key, `writes`."""

from __future__ import annotations

from typing import Literal, cast

from orchestrator.config.schema import STAGE_KEY, Choice, Key, Section

Writes = Literal["code", "notes"]
WRITES: tuple[Writes, ...] = ("code", "notes")

NOTES_SECTION: Section[Writes] = Section(
    name="notes",
    keys=(
        Key(
            "writes",
            Choice(WRITES),
            "code",
            "what the stage's attempts write: `\"code\"` is the change, committed on the task's "
            'branch; `"notes"` (research, review) is moved out of the worktree into the task\'s '
            "notes folder once the attempt's commands ran, never committed, and given to every "
            "stage as `ORCHESTRATOR_NOTES` ([notes stages](../how-to/notes.md))",
            STAGE_KEY,
        ),
    ),
    build=lambda values: cast(Writes, values["writes"]),
    extension=True,
)
