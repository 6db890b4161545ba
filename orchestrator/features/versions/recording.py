"""Where versions are recorded: every version a host loads, at the start
of a tick's claims and at `add`; a task's version when it is added; an
attempt's when it is claimed. Reached by the engine only through the
hooks (`FEATURE` in `__init__.py`).

A tick computes its versions once (the first time a hook needs them), from
the config it loaded and its prompt files as they stand then, and claims
for that config only (an edited config file stops its claiming): so every
attempt of one tick records the version its tick loaded.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from orchestrator import runner
from orchestrator.config import Settings
from orchestrator.ext.hooks import TickHooks
from orchestrator.ext.model import Claim, TickOptions
from orchestrator.features.versions import store
from orchestrator.features.versions.definition import PipelineVersion, loaded_version
from orchestrator.storage.db import db_now, read_tx

if TYPE_CHECKING:
    from orchestrator.ext.ports import Kernel


def loaded_versions(settings: Settings) -> dict[str, PipelineVersion]:
    """Each configured pipeline's version, by pipeline name, as this host
    loads it now (its prompt files read)."""
    return {name: loaded_version(p) for name, p in sorted(settings.pipelines.items())}


def this_host() -> str:
    """The host a version's row names: as a tick's attempts name it."""
    return os.environ.get("ORCHESTRATOR_HOST") or runner.host_name()


def tick_hooks(kernel: Kernel) -> TickHooks:
    """Versions in a tick: the loaded ones kept before the first claim (a
    read when all are kept already), each claimed attempt stamped in the
    claim's transaction."""
    loaded = functools.cache(lambda: loaded_versions(kernel.settings))

    def before_claims(options: TickOptions) -> None:
        versions = loaded()
        with read_tx(kernel.tx.engine) as conn:
            missing = set(v.hash for v in versions.values()) - store.known(
                conn, [v.hash for v in versions.values()]
            )
        if missing:
            kernel.tx.retrying(lambda _again: _keep(kernel, versions, missing))

    def after_claim(conn: Connection, claim: Claim, now: datetime) -> None:
        version = loaded().get(claim.pipeline.name)
        if version is not None:
            store.stamp_attempt(
                conn, task_id=claim.task.id, attempt_id=claim.attempt_id, version=version.hash
            )

    return TickHooks(before_claims=before_claims, after_claim=after_claim)


def _keep(kernel: Kernel, versions: Mapping[str, PipelineVersion], missing: set[str]) -> None:
    with kernel.tx.write() as conn:
        new = [v for v in versions.values() if v.hash in missing]
        store.record(conn, new, now=db_now(conn), host=kernel.me.host)


def tasks_added(
    conn: Connection, settings: Settings, added: Mapping[str, str], now: datetime
) -> None:
    """`add`: every version this host loads kept, each new task on its
    pipeline's version."""
    versions = loaded_versions(settings)
    store.record(conn, list(versions.values()), now=now, host=this_host())
    by_version: dict[str, list[str]] = {}
    for slug, pipeline in added.items():
        if pipeline in versions:
            by_version.setdefault(versions[pipeline].hash, []).append(slug)
    for version, slugs in by_version.items():
        store.stamp_added(conn, slugs, version)
