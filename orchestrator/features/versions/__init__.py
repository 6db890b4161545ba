"""Pipeline versions: the content hash of what a pipeline's stages do
(`definition.py`), every version a host loads kept in the database with
the version each task was added on and each attempt ran (`store.py`,
written through the hooks of `recording.py`), and what `pipelines` and
`show` say of them (`views.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from orchestrator.ext.hooks import Feature, TickHooks
from orchestrator.features.versions.config import VERSIONS_SECTION

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from orchestrator.config import Settings
    from orchestrator.ext.ports import Kernel


def _tick(kernel: Kernel) -> TickHooks:
    # Imported when a Ticker is built: registering the feature loads no
    # SQLAlchemy.
    from orchestrator.features.versions.recording import tick_hooks

    return tick_hooks(kernel)


def _added(conn: Connection, settings: Settings, added: Mapping[str, str], now: datetime) -> None:
    from orchestrator.features.versions.recording import tasks_added

    tasks_added(conn, settings, added, now)


FEATURE = Feature(
    name="versions",
    config=(VERSIONS_SECTION,),
    commands={"migrate": "orchestrator.features.versions.cli:migrate"},
    stages_of="orchestrator.features.versions.views:own_stages",
    tick=_tick,
    added=_added,
)
