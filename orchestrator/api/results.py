"""What `Project`'s operations report: a restore, a calibration, a migration,
the schema's revision, the outbox and events, the metrics, a prune.

Views of the same kind as `orchestrator.api.types` (frozen, slotted, their
`to_dict()` the command's `--json` object); kept apart because they answer
commands that change or inspect the installation, not a task's reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.api.types import JsonObject, deprecated_getitem, json_fields


@dataclass(frozen=True, slots=True)
class RestoreResult:
    """What `restore()` put back, as `restore --json`; `commit` is None when
    the branch held that attempt's work already."""

    task: str
    stage: str
    attempt: int
    ref: str
    commit: str | None

    __getitem__ = deprecated_getitem

    def to_dict(self) -> dict[str, object]:
        return json_fields(self)


@dataclass(frozen=True, slots=True)
class CalibrateResult:
    """The spread of `calibrate()`'s scores, as `calibrate --json`."""

    task: str
    stage: str
    samples: int
    mean: float
    stdev: float
    min: float
    max: float
    suggested_min_delta: float
    invalid: int  # runs that printed no verdict, left out of the spread
    scores: tuple[float, ...]

    __getitem__ = deprecated_getitem

    def to_dict(self) -> dict[str, object]:
        return json_fields(self)


@dataclass(frozen=True, slots=True)
class MigrateResult:
    """The schema revision before and after `Project.migrate()`; `created`
    when it made the SQLite file. None is an empty database."""

    before: str | None
    after: str | None
    created: bool = False

    def to_dict(self) -> dict[str, object]:
        return json_fields(self)


@dataclass(frozen=True, slots=True)
class SchemaRevision:
    """`Project.schema_revision()`: the database's revision (None: empty)
    and the one this code expects."""

    database: str | None
    code: str

    def to_dict(self) -> dict[str, object]:
        return json_fields(self)


@dataclass(frozen=True, slots=True)
class Delivery:
    """One hook's standing on one event."""

    hook: str
    tries: int
    last_error: str | None
    next_try_at: str | None
    delivered_at: str | None

    __getitem__ = deprecated_getitem

    def to_dict(self) -> dict[str, object]:
        return json_fields(self)


@dataclass(frozen=True, slots=True)
class EventView:
    """One event of `events()`, a row of `events --json`."""

    id: int
    kind: str
    task: str
    state: str | None
    reason: str | None
    at: str
    dispatched: bool
    deliveries: tuple[Delivery, ...]
    payload: JsonObject

    __getitem__ = deprecated_getitem

    def to_dict(self) -> dict[str, object]:
        return json_fields(self)


@dataclass(frozen=True, slots=True)
class Metrics:
    """`metrics()`: the Prometheus text exposition, read in one transaction."""

    exposition: bytes

    @property
    def text(self) -> str:
        return self.exposition.decode()

    def write_textfile(self, path: Path) -> None:
        """Write them to `path` atomically, for node_exporter's textfile
        collector: a file that cannot be written is `HostIOError` (74, or 77
        for a permission or a read-only disk), no temporary file left behind."""
        from orchestrator.views.metrics import write_exposition

        write_exposition(path, self.exposition)


@dataclass(frozen=True, slots=True)
class RemovedWorktree:
    """A finished branch task's worktree `prune(finished=True)` removed (or
    would); `error` when git refused and it is still there. The branch stays."""

    slug: str
    workspace: Path
    branch: str
    error: str | None = None

    def to_dict(self) -> dict[str, object]:
        return json_fields(self)


@dataclass(frozen=True, slots=True)
class PrunedFolder:
    """A task's state_root folder `prune(older_than=)` removed (or would)."""

    slug: str
    path: Path
    size: int  # bytes, links not followed

    def to_dict(self) -> dict[str, object]:
        return json_fields(self)


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What `prune()` removed, or with `dry_run` would: worktrees first, then
    folders; `kept` are folders left alone because they overlap workspace_root."""

    dry_run: bool
    worktrees: tuple[RemovedWorktree, ...] = ()
    folders: tuple[PrunedFolder, ...] = ()
    kept: tuple[Path, ...] = ()

    @property
    def freed(self) -> int:
        """Bytes the folders held."""
        return sum(folder.size for folder in self.folders)

    def to_dict(self) -> dict[str, object]:
        return json_fields(self)


__all__ = [
    "CalibrateResult",
    "Delivery",
    "EventView",
    "Metrics",
    "MigrateResult",
    "PruneResult",
    "PrunedFolder",
    "RemovedWorktree",
    "RestoreResult",
    "SchemaRevision",
]
