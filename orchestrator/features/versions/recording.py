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
    SHORT,
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
    task runs, its own version's from the host's kept copy (the current
    one's too, so an attempt runs the prompt its version hashed); a task
    whose version this host cannot run left where it is; each claimed
    attempt stamped in the claim's transaction."""
    found = _TickVersions(kernel)
    return TickHooks(
        before_claims=found.before_claims,
        leave_task=found.leave_task,
        pipeline_of=found.pipeline_of,
        after_claim=found.after_claim,
    )


class _TickVersions:
    """One tick's versions, computed the first time a hook needs them."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.settings = kernel.settings
        self._loaded: dict[str, Loaded] | None = None
        # What each version runs on this host (a pipeline), or why it
        # cannot (a sentence), resolved once a tick; and each such
        # pipeline's version by identity, for the attempt's stamp.
        self.runs: dict[str, PipelineConfig | str] = {}
        self.hashes: dict[int, str] = {}
        # The unfinished tasks not on their pipeline's current version,
        # read once a tick at its first claim or advance; every other task
        # runs the current one. A task added later in the tick is on the
        # current one (an edited config stops the claiming).
        self._off: dict[int, str | None] | None = None
        self.names: dict[str, tuple[str, ...] | None] = {}  # old versions' stage names
        self.warned: set[int] = set()

    def loaded(self) -> dict[str, Loaded]:
        if self._loaded is None:
            self._loaded = load(self.settings)
        return self._loaded

    def off_current(self, conn: Connection) -> dict[int, str | None]:
        if self._off is None:
            hashes = {f.version.hash for f in self.loaded().values()}
            self._off = store.off_current(conn, hashes)
        return self._off

    def run_of(self, version: str) -> PipelineConfig | str:
        if version not in self.runs:
            now = next((f for f in self.loaded().values() if f.version.hash == version), None)
            self.runs[version] = found = resolve(self.settings, version, now)
            if not isinstance(found, str):
                self.hashes[id(found)] = version
        return self.runs[version]

    def decide(self, conn: Connection, task: repo.TaskSnapshot) -> PipelineConfig | str | None:
        """The pipeline `task` runs, why it waits, or None (the configured
        one: the config lacks the task's pipeline)."""
        known = self.off_current(conn)
        now = self.loaded().get(task.pipeline)
        version = known.get(task.id)
        if version is None:  # on the current version, or from before versions
            return None if now is None else self.run_of(now.version.hash)
        if now is None or on_change(now.pipeline) != "upgrade":
            return self.run_of(version)
        if version not in self.names:
            self.names[version] = store.stage_names(conn, version)
        problem = breaking(self.names[version], now.pipeline.stage_names, task.stage)
        if problem is None:
            return self.run_of(now.version.hash)
        return held(task, problem, now.version)

    def before_claims(self, options: TickOptions) -> None:
        kernel = self.kernel
        versions = {name: found.version for name, found in self.loaded().items()}
        # A state folder that refuses the copy refuses the attempts' folders
        # too: the tick says that once, as the host's fault; the versions
        # then run the config as loaded (`resolve`).
        keep_files(self.settings, self.loaded())

        def missing(_again: bool) -> set[str]:
            # Retried as every read of the tick: a dropped connection is
            # not the host's fault until the retries are spent.
            with read_tx(kernel.tx.engine) as conn:
                hashes = [v.hash for v in versions.values()]
                return set(hashes) - store.known(conn, hashes)

        new = kernel.tx.retrying(missing)
        if new:
            kernel.tx.retrying(lambda _again: _keep_rows(kernel, versions, new))

    def leave_task(self, conn: Connection, task: repo.TaskSnapshot) -> str | None:
        why = self.decide(conn, task)
        if not isinstance(why, str):
            return None
        if task.id not in self.warned:
            self.warned.add(task.id)
            self.kernel.tick.warn(f"{task.slug}: waits ({why})")
        return why

    def pipeline_of(
        self, conn: Connection, task: repo.TaskSnapshot, _configured: PipelineConfig | None
    ) -> PipelineConfig | None:
        found = self.decide(conn, task)
        return None if found is None or isinstance(found, str) else found

    def after_claim(self, conn: Connection, claim: Claim, now: datetime) -> None:
        version = self.hashes.get(id(claim.pipeline))
        if version is None:
            return
        store.stamp_attempt(conn, claim.attempt_id, version)
        known = self.off_current(conn)
        if claim.task.id in known and known[claim.task.id] != version:
            # From before versions, or moved by `on_change = "upgrade"`.
            store.move(conn, claim.task.id, version)
            del known[claim.task.id]


def resolve(settings: Settings, version: str, now: Loaded | None) -> PipelineConfig | str:
    """What `version` runs on this host: its kept copy, checked against its
    hash; the config as loaded when the current version could not be kept;
    else why this host leaves its tasks (it never loaded it, or its copy
    was changed)."""
    try:
        rebuilt = kept.load(settings.state_root, version)
    except kept.Tampered as exc:
        return f"pipeline version {version[:SHORT]} refused: {exc}"
    if rebuilt is not None:
        return kept.with_extras(rebuilt, settings.pipeline(rebuilt.name))
    if now is not None:
        return now.pipeline
    return f"this host does not hold pipeline version {version[:SHORT]}"


def on_change(pipeline: PipelineConfig) -> str:
    """`[pipelines.NAME] on_change`: "pin" (the default) or "upgrade"."""
    from orchestrator.features.versions.config import VERSIONS_SECTION

    return VERSIONS_SECTION.of(pipeline).on_change


def held(task: repo.TaskSnapshot, problem: str, current: PipelineVersion) -> str:
    """Why an `upgrade` pipeline's task waits, and the command that moves it."""
    return (
        f"{problem} in version {current.short}: held until "
        f"`orchestrator migrate {task.slug} --to current --map {task.stage}=STAGE`"
    )


def breaking(old: tuple[str, ...] | None, new: tuple[str, ...], stage: str) -> str | None:
    """Why moving a task at `stage` from `old` stage names to `new` breaks
    it; None when compatible: its stage and the later ones are all in `new`,
    in the same order (commands, prompts and limits may differ)."""
    if old is None or stage not in old:
        return "its own version's stages are unknown here"
    if stage not in new:
        return f"stage {stage!r} has no place"
    rest = iter(new[new.index(stage) :])
    for name in old[old.index(stage) :]:
        if name not in rest:
            return f"stage {name!r} has no place after {stage!r}"
    return None


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
