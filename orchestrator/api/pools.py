"""The pools from outside the tick: what they are doing, and ending a pause
by hand (`orchestrator pool resume NAME`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from orchestrator.api.actions import ActionResult
from orchestrator.config import Settings
from orchestrator.errors import RefusedError
from orchestrator.features.pools import store as pool_rows
from orchestrator.features.pools.gate import PoolGate
from orchestrator.features.pools.views import pool_states
from orchestrator.storage.db import db_now, read_tx, write_tx


def pool_list(engine: Engine, settings: Settings) -> list[dict[str, Any]]:
    with read_tx(engine) as conn:
        return pool_states(conn, settings, db_now(conn))


def resume_pool(engine: Engine, settings: Settings, name: str, actor: str) -> ActionResult:
    """Refused (exit 1) for a pool neither the configuration nor the
    database knows; resuming a pool that is not paused changes nothing."""
    with write_tx(engine) as conn:
        if name not in settings.pools and pool_rows.get_pool(conn, name) is None:
            known = ", ".join(sorted(settings.pools)) or "none configured"
            raise RefusedError(f"no pool {name!r} (pools: {known})")
        changed = PoolGate(settings).resume(conn, name, db_now(conn), actor)
    message = f"pool {name}: resumed" if changed else f"pool {name}: not paused; nothing changed"
    return ActionResult(slug=name, changed=changed, state="running", message=message)
