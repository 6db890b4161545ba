"""Where an attempt's state folder is. What the tick looks up about a
task's stage (its config, its pipeline's stage names, its policy) is
`ext/lookups.py`, shared with the features."""

from __future__ import annotations

from pathlib import Path

from orchestrator.config import Settings


def attempt_folder(settings: Settings, slug: str, stage: str, number: int) -> Path:
    return settings.state_root / slug / f"{stage}-{number:03d}"
