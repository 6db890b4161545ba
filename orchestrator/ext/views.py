"""What a feature adds to `explain`: one key of its own in the JSON and the
lines its text prints. The engine's keys never change for it (scripts read
them), so a feature's view is its own key, present only when it has
something to say about the task."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from orchestrator.config import Settings
    from orchestrator.storage import repo


@dataclass(frozen=True)
class Explained:
    """A feature's answer for one task: `data` under `key` in `explain
    --json` (JSON values only), `lines` after the engine's in the text."""

    key: str
    data: object
    lines: tuple[str, ...] = ()


Explainer = Callable[["Connection", "Settings", "repo.TaskSnapshot"], Explained | None]
"""Called inside `explain`'s read transaction (reads only), once per call;
None when the feature has nothing to say about the task."""
