"""`orchestrator migrate`: move tasks in flight to another version of their
pipeline, each in a transaction of its own (`Move`), after a plan that can
be printed and changes nothing (`plan`).

A task's place in the target version is its stage, or the stage `--map`
names for it; a stage the target lacks with no `--map` entry refuses that
task, naming the stage and the spelling that would move it. A task that is
running (or landing) is refused until its attempt (its landing) ends. The
target must be a version this host holds: what it will run comes from this
host's own kept copy, never from the database's display copy. The old and
the target version's stage names and verifier argv are read from the
definitions the database shows: to compare, never to run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection

from orchestrator.config import Settings
from orchestrator.domain.event_kinds import MIGRATED
from orchestrator.domain.pipeline import Event, State, Status
from orchestrator.errors import RefusedError
from orchestrator.features.versions import kept, store
from orchestrator.features.versions.definition import SHORT
from orchestrator.features.versions.recording import loaded_versions
from orchestrator.storage import repo
from orchestrator.storage.db import db_now
from orchestrator.storage.repo import outbox
from orchestrator.testing import fault_point

RESTARTED = "verifier changed: window restarted"
_MOVABLE = (Status.READY, Status.AWAITING_APPROVAL, Status.APPROVED, Status.HALTED)


@dataclass(frozen=True, slots=True)
class Version:
    """A version as `migrate` compares it: its stage names in order and each
    stage's verifier argv (None: no verifier), from its shown definition."""

    pipeline: str
    hash: str
    stages: tuple[str, ...]
    verifiers: Mapping[str, object] = field(default_factory=dict)

    @property
    def short(self) -> str:
        return self.hash[:SHORT]


@dataclass(frozen=True, slots=True)
class Move:
    """One task's plan: where it stands, where it will stand, and whether its
    recorded scores stay comparable (the same verifier at its new stage);
    `refused` says why it will not move."""

    slug: str
    task_id: int
    state: str
    from_version: str | None
    to: Version
    from_stage: str
    to_stage: str
    comparable: bool | None
    refused: str | None = None

    def line(self) -> str:
        old = "-" if self.from_version is None else self.from_version[:SHORT]
        if self.refused is not None:
            return f"{self.slug}: refused: {self.refused}"
        scores = "unknown (no recorded version)"
        if self.comparable is not None:
            scores = "comparable" if self.comparable else "not comparable (its verifier changed)"
        return (
            f"{self.slug}: {self.state} on {old} -> {self.to_stage} on {self.to.short}; "
            f"scores {scores}"
        )


def parse_maps(maps: Sequence[str]) -> dict[str, str]:
    """`--map OLD=NEW`, each once; ValueError names a malformed one."""
    found: dict[str, str] = {}
    for item in maps:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            raise ValueError(f"--map {item!r}: expected OLD=NEW (two stage names)")
        if old in found:
            raise ValueError(f"--map {old}=...: given twice")
        found[old] = new
    return found


def version_of(conn: Connection, settings: Settings, pipeline: str, to: str) -> Version:
    """The target: `current` (this host's config) or a version hash (or its
    first 12+ digits) of `pipeline`; refused unless this host holds it."""
    if to == "current":
        now = loaded_versions(settings).get(pipeline)
        if now is None:
            raise RefusedError(f"--to current: the config has no pipeline {pipeline!r}")
        return _version(pipeline, now.hash, now.definition)
    rows = [
        r
        for r in store.all_versions(conn)
        if r.hash.startswith(to.lower()) and r.pipeline == pipeline
    ]
    if len(to) < SHORT or len(rows) != 1:
        raise RefusedError(
            f"--to {to}: no version of pipeline {pipeline!r} is named so "
            "(`orchestrator pipelines` lists them; give current or 12+ hex digits)"
        )
    version = rows[0].hash
    try:
        if kept.load(settings.state_root, version) is None:
            raise RefusedError(
                f"--to {to}: this host does not hold version {version[:SHORT]}; "
                "migrate from a host that loaded it"
            )
    except kept.Tampered as exc:
        raise RefusedError(f"--to {to}: {exc}") from exc
    return shown(conn, pipeline, version)


def shown(conn: Connection, pipeline: str, version: str) -> Version:
    """`version`'s stage names and verifiers as its row shows them."""
    return _version(pipeline, version, store.definition_of(conn, version))


def _version(pipeline: str, version: str, definition: Mapping[str, Any]) -> Version:
    stages = definition.get("stages", [])
    return Version(
        pipeline,
        version,
        tuple(str(s["name"]) for s in stages),
        {str(s["name"]): s.get("verifier") for s in stages},
    )


def selected(
    conn: Connection,
    slugs: Sequence[str],
    *,
    pipeline: str | None,
    since: str | None,
) -> list[repo.TaskSnapshot]:
    """The tasks named, or (none named) every unfinished one of `pipeline`
    on version `since` (a prefix), oldest first."""
    if slugs:
        found = []
        for slug in slugs:
            task = repo.get_task(conn, slug)
            if task is None:
                raise RefusedError(f"no task {slug!r}")
            found.append(task)
        return found
    slugs = store.unfinished_slugs(conn, pipeline, since)
    return [t for slug in slugs if (t := repo.get_task(conn, slug)) is not None]


def plan(
    conn: Connection,
    settings: Settings,
    chosen: Sequence[repo.TaskSnapshot],
    to: str,
    maps: Mapping[str, str],
    *,
    everything: bool,
) -> list[Move]:
    """Each chosen task's move (or refusal). With `everything` (`--all`)
    a task already on the target is left out; named, it is refused."""
    targets: dict[str, Version] = {}
    moves: list[Move] = []
    olds: set[str] = set()
    for task in chosen:
        if task.pipeline not in targets:
            targets[task.pipeline] = version_of(conn, settings, task.pipeline, to)
        target = targets[task.pipeline]
        own = store.task_version(conn, task.id)
        if everything and own == target.hash:
            continue
        before = None if own is None else shown(conn, task.pipeline, own)
        olds.update(before.stages if before is not None else (task.stage,))
        moves.append(_move(task, own, before, target, maps))
    for old, new in maps.items() if moves else ():
        if old not in olds and all(old not in t.stages for t in targets.values()):
            raise RefusedError(f"--map {old}={new}: neither version has a stage {old!r}")
        for target in targets.values():
            if new not in target.stages:
                raise RefusedError(
                    f"--map {old}={new}: version {target.short} has no stage {new!r} "
                    f"(its stages: {', '.join(target.stages)})"
                )
    return moves


def _move(
    task: repo.TaskSnapshot,
    own: str | None,
    before: Version | None,
    target: Version,
    maps: Mapping[str, str],
) -> Move:
    stage = maps.get(task.stage, task.stage)
    comparable = None
    if before is not None and task.stage in before.verifiers and stage in target.verifiers:
        comparable = before.verifiers[task.stage] == target.verifiers[stage]
    refused = None
    if task.status in (Status.RUNNING, Status.LANDING):
        refused = f"{task.status.value}; migrate it once its attempt ends"
    elif task.status not in _MOVABLE:
        refused = f"{task.status.value}: finished"
    elif own == target.hash and stage == task.stage:
        refused = f"already on version {target.short}"
    elif stage not in target.stages:
        refused = (
            f"stage {task.stage!r} has no place in version {target.short}; "
            f"use --map {task.stage}=STAGE (its stages: {', '.join(target.stages)})"
        )
    return Move(
        task.slug, task.id, str(task.state), own, target, task.stage, stage, comparable, refused
    )


def apply(conn: Connection, move: Move, *, actor: str, maps: Mapping[str, str]) -> bool:
    """`move` in `conn`'s transaction: the `migrate` transition (actor, both
    versions, the map), the task's version, the `migrated` event. False when
    the task moved since it was planned (nothing written)."""
    task = repo.get_task(conn, move.slug, for_update=True)
    if task is None or str(task.state) != move.state:
        return False
    if store.task_version(conn, task.id) != move.from_version:
        return False
    now = db_now(conn)
    old = "none" if move.from_version is None else move.from_version[:SHORT]
    mapped = ", ".join(f"{k}={v}" for k, v in sorted(maps.items())) or "none"
    reason = f"pipeline version {old} -> {move.to.short}; map: {mapped}"
    if move.comparable is False:  # scores of two verifiers never share a window
        reason += f"; {RESTARTED}"
    after = repo.apply_transition(
        conn,
        task,
        Event.MIGRATE,
        State(move.to_stage, task.status),
        now=now,
        actor=actor,
        reason=reason,
        new_run=move.comparable is False,
    )
    store.move(conn, task.id, move.to.hash)
    outbox.record(
        conn,
        MIGRATED,
        after,
        now=now,
        attempt_id=None,
        facts={
            "actor": actor,
            "from_version": move.from_version,
            "to_version": move.to.hash,
            "from_stage": move.from_stage,
            "map": dict(maps),
        },
    )
    return True


def between_tasks() -> None:
    """A crash point after one task's transaction committed and before the next."""
    fault_point("migrate_between_tasks")
