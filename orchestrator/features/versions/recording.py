"""Where versions are recorded and pinned: every version a host loads is
kept (its row at the start of a tick's claims and at `add`; its files in
the host's state folder, `kept.py`); a task's version when it is added; an
attempt's when it is claimed; and a task on an older version than the
config's runs that version's pipeline (`pipeline_of`). Reached by the
engine only through the hooks (`FEATURE` in `__init__.py`).

A tick computes its versions once (the first time a hook needs them), from
the config it loaded and its prompt files as they stand then, and claims
for that config only (an edited config file stops its claiming): so every
attempt of one tick records the version its tick loaded.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from orchestrator import runner
from orchestrator.config import PipelineConfig, Settings
from orchestrator.ext.hooks import TickHooks
from orchestrator.ext.model import Claim, TickOptions
from orchestrator.features.versions import kept, store
from orchestrator.features.versions.definition import (
    PipelineVersion,
    Prompts,
    pipeline_version,
    read_prompts,
)
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, read_tx

if TYPE_CHECKING:
    from orchestrator.ext.ports import Kernel


@dataclass(frozen=True)
class Loaded:
    """A pipeline as this host loaded it: its version, and the prompt
    bytes the version was computed from (what `kept` keeps)."""

    pipeline: PipelineConfig
    version: PipelineVersion
    prompts: Prompts


def load(settings: Settings) -> dict[str, Loaded]:
    """Each configured pipeline as this host loads it now, by name."""
    found = {}
    for name, pipeline in sorted(settings.pipelines.items()):
        prompts = read_prompts(pipeline)
        found[name] = Loaded(pipeline, pipeline_version(pipeline, prompts), prompts)
    return found


def loaded_versions(settings: Settings) -> dict[str, PipelineVersion]:
    """Each configured pipeline's version, by pipeline name, as this host
    loads it now (its prompt files read)."""
    return {name: found.version for name, found in load(settings).items()}


def this_host() -> str:
    """The host a version's row names: as a tick's attempts name it."""
    return os.environ.get("ORCHESTRATOR_HOST") or runner.host_name()


def keep_files(settings: Settings, loaded: Mapping[str, Loaded]) -> str | None:
    """Each loaded version's files kept in the state folder; the problem
    when the folder refuses (the tasks of these versions then run the
    config as it is after an edit)."""
    for found in loaded.values():
        try:
            kept.keep(settings.state_root, found.version, found.pipeline, found.prompts)
        except OSError as exc:
            return f"cannot keep pipeline version {found.version.short} ({exc})"
    return None


def tick_hooks(kernel: Kernel) -> TickHooks:
    """Versions in a tick: the loaded ones kept before the first claim (a
    read when all are kept already); the pipeline a claimed or advanced
    task runs, its own version's; each claimed attempt stamped in the
    claim's transaction."""
    settings = kernel.settings
    loaded = functools.cache(lambda: load(settings))
    # The version of each pipeline object a claim can carry: the configured
    # ones, and those rebuilt from kept files (by identity: each built once).
    configured = functools.cache(
        lambda: {id(f.pipeline): f.version.hash for f in loaded().values()}
    )
    pinned: dict[str, PipelineConfig | None] = {}
    pinned_hashes: dict[int, str] = {}
    # The unfinished tasks not on their pipeline's current version, read
    # once a tick at its first claim or advance; every other task runs the
    # configured pipeline. A task added later in the tick is on the current
    # one (an edited config stops the claiming).
    off: dict[int, str | None] = {}
    read_off: list[bool] = []

    def off_current(conn: Connection) -> dict[int, str | None]:
        if not read_off:
            off.update(store.off_current(conn, {f.version.hash for f in loaded().values()}))
            read_off.append(True)
        return off

    def version_of(pipeline: PipelineConfig) -> str | None:
        return pinned_hashes.get(id(pipeline)) or configured().get(id(pipeline))

    def before_claims(options: TickOptions) -> None:
        versions = {name: found.version for name, found in loaded().items()}
        problem = keep_files(settings, loaded())
        if problem is not None:
            kernel.tick.warn(problem)
        with read_tx(kernel.tx.engine) as conn:
            missing = {v.hash for v in versions.values()} - store.known(
                conn, [v.hash for v in versions.values()]
            )
        if missing:
            kernel.tx.retrying(lambda _again: _keep_rows(kernel, versions, missing))

    def pipeline_of(
        conn: Connection, task: repo.TaskSnapshot, _configured: PipelineConfig | None
    ) -> PipelineConfig | None:
        version = off_current(conn).get(task.id)
        if version is None:  # on the current version, or from before versions
            return None
        if version not in pinned:
            rebuilt = kept.load(settings.state_root, version)
            pinned[version] = rebuilt
            if rebuilt is not None:
                pinned_hashes[id(rebuilt)] = version
        return pinned[version]

    def after_claim(conn: Connection, claim: Claim, now: datetime) -> None:
        version = version_of(claim.pipeline)
        if version is None:
            return
        store.stamp_attempt(conn, claim.attempt_id, version)
        if claim.task.id in (known := off_current(conn)) and known[claim.task.id] is None:
            store.adopt(conn, claim.task.id, version)  # from before versions: now on this one
            del known[claim.task.id]

    return TickHooks(before_claims=before_claims, pipeline_of=pipeline_of, after_claim=after_claim)


def _keep_rows(kernel: Kernel, versions: Mapping[str, PipelineVersion], missing: set[str]) -> None:
    with kernel.tx.write() as conn:
        new = [v for v in versions.values() if v.hash in missing]
        store.record(conn, new, now=db_now(conn), host=kernel.me.host)


def tasks_added(
    conn: Connection, settings: Settings, added: Mapping[str, str], now: datetime
) -> None:
    """`add`: every version this host loads kept (row and files), each new
    task on its pipeline's version."""
    loaded = load(settings)
    keep_files(settings, loaded)  # a refusing state folder does not refuse the add
    versions = {name: found.version for name, found in loaded.items()}
    store.record(conn, list(versions.values()), now=now, host=this_host())
    by_version: dict[str, list[str]] = {}
    for slug, pipeline in added.items():
        if pipeline in versions:
            by_version.setdefault(versions[pipeline].hash, []).append(slug)
    for version, slugs in by_version.items():
        store.stamp_added(conn, slugs, version)
