"""What `Project`'s reading methods return: frozen views, typed for mypy.

Each view's `to_dict()` is exactly the JSON object its command prints with
`--json` (same keys, same order): the CLI, the MCP door and scripts that
stored those objects keep working, and the library gains attributes a type
checker can follow. The fields are the command's keys, but for `pass`
(`passed`, a keyword in Python).

Parts whose shape other modules own and document for the CLI (an attempt of
`show`, the plateau of `explain`, an event's payload) stay JSON objects
(`Mapping[str, object]`): a second copy of their shape here would drift
from the one the reference pins.

Until the next release a view still answers `view["key"]`, as the dict it
replaced did, with a `DeprecationWarning`.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, Protocol, TypeVar

JsonObject = Mapping[str, object]
View = TypeVar("View")


class _HasDict(Protocol):
    def to_dict(self) -> dict[str, object]: ...


def deprecated_getitem(self: _HasDict, key: str) -> object:
    """`view["key"]`, as when the method returned a dict: the value its JSON has."""
    warnings.warn(
        f"{type(self).__name__}[{key!r}] is deprecated: use the attribute, or "
        "to_dict() for the JSON object (item access goes in the next release)",
        DeprecationWarning,
        stacklevel=2,
    )
    return self.to_dict()[key]


def _plain(value: object) -> object:
    """A field's JSON value: views as objects, tuples as lists, paths as text."""
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if isinstance(value, PurePath):
        return str(value)
    to_dict = getattr(value, "to_dict", None)
    if dataclasses.is_dataclass(value) and callable(to_dict):
        return to_dict()
    return value


def json_fields(view: object, *, skip: frozenset[str] = frozenset()) -> dict[str, object]:
    """The view's fields in declaration order, under their JSON names."""
    out: dict[str, object] = {}
    for f in dataclasses.fields(view):  # type: ignore[arg-type]
        if f.name not in skip:
            out[f.metadata.get("key", f.name)] = _plain(getattr(view, f.name))
    return out


def of_json(cls: type[View], data: Mapping[str, Any], **parts: object) -> View:
    """The view of one JSON object its command prints: each field from its
    key, lists as tuples; `parts` are fields built by the caller."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in parts:
            values[f.name] = parts[f.name]
            continue
        value = data[f.metadata.get("key", f.name)]
        values[f.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)


_PASS = {"key": "pass"}  # `pass` is the JSON key; `passed` the attribute


@dataclass(frozen=True, slots=True)
class TaskRow:
    """One task of `tasks()`, a row of `list --json`."""

    slug: str
    title: str
    pipeline: str
    priority: int
    state: str
    stage: str
    status: str
    attempt: int
    score: float | None
    cost_usd: float | None
    budget: float | None
    halt_reason: str | None
    updated_at: str | None

    __getitem__ = deprecated_getitem

    def to_dict(self) -> dict[str, object]:
        return json_fields(self)


@dataclass(frozen=True, slots=True)
class Wait:
    """A task this one waits on (`add --after`), and where it is."""

    slug: str
    state: str

    __getitem__ = deprecated_getitem

    def to_dict(self) -> dict[str, object]:
        return json_fields(self)


@dataclass(frozen=True, slots=True)
class Transition:
    """One transition of a task, as `show --json` lists them (oldest first)."""

    seq: int
    from_state: str | None
    to_state: str
    event: str
    actor: str | None
    reason: str | None
    note: str | None
    attempt_id: int | None
    at: str | None

    __getitem__ = deprecated_getitem

    def to_dict(self) -> dict[str, object]:
        return json_fields(self)


@dataclass(frozen=True, slots=True)
class WaitOn:
    """A task this one waits on, as `explain` names it: with its status and
    why it halted (a halted one holds this task back until resumed)."""

    slug: str
    state: str
    status: str
    halt_reason: str | None

    __getitem__ = deprecated_getitem

    def to_dict(self) -> dict[str, object]:
        return json_fields(self)


@dataclass(frozen=True, slots=True)
class GateChange:
    """The files a gate's change touches since `base`, each as (status, path)."""

    base: str
    files: tuple[tuple[str, str], ...]

    __getitem__ = deprecated_getitem

    def to_dict(self) -> dict[str, object]:
        return {"base": self.base, "files": [list(f) for f in self.files]}


@dataclass(frozen=True, slots=True)
class GateFacts:
    """What `show` adds for a task at a gate: the hash `approve(expect=)`
    checks, the agent's answer, and (a branch task) its change, whole and
    this stage's part."""

    approval_hash: str
    answer: str | None
    whole: GateChange | None = None
    stage: GateChange | None = None
    branch: bool = False  # a branch task: `gate_changes` is printed

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"approval_hash": self.approval_hash, "answer": self.answer}
        if self.branch:
            out["gate_changes"] = {
                name: None if part is None else part.to_dict()
                for name, part in (("whole", self.whole), ("stage", self.stage))
            }
        return out


@dataclass(frozen=True, slots=True)
class TaskView:
    """One task of `task()`, as `show --json`: its transitions and attempts
    (each attempt a JSON object, docs/reference/commands.md), where a branch task's change
    is (`change`), and at a gate what `approve` needs (`gate`)."""

    slug: str
    title: str
    body: str
    pipeline: str
    pipeline_version: str | None
    priority: int
    state: str
    stage: str
    status: str
    attempt: int
    score: float | None
    cost_usd: float | None
    budget: float | None
    halt_reason: str | None
    next_hint: str | None
    host: str | None
    created_at: str | None
    updated_at: str | None
    after: tuple[Wait, ...]
    parent: str | None
    subtasks: tuple[str, ...]
    transitions: tuple[Transition, ...]
    attempts: tuple[JsonObject, ...]
    change: JsonObject | None
    gate: GateFacts | None = None

    __getitem__ = deprecated_getitem

    @property
    def approval_hash(self) -> str | None:
        return None if self.gate is None else self.gate.approval_hash

    @property
    def answer(self) -> str | None:
        return None if self.gate is None else self.gate.answer

    def to_dict(self) -> dict[str, object]:
        out = json_fields(self, skip=frozenset({"gate"}))
        out["attempts"] = [dict(a) for a in self.attempts]
        if self.gate is not None:
            out.update(self.gate.to_dict())
        return out


@dataclass(frozen=True, slots=True)
class ExplainView:
    """`explain()`, as `explain --json`: why the task is where it is and what
    the next tick will do (`next_tick`). Each part is None when it does not
    apply; its keys are in docs/reference/commands.md."""

    slug: str
    state: str
    stage: str
    status: str
    halt_reason: str | None
    run: int
    host: str | None
    now: str
    last_attempt: JsonObject | None
    attempts: JsonObject | None
    plateau: JsonObject | None
    no_change: JsonObject | None
    backoff: JsonObject | None
    pending: JsonObject | None
    running: JsonObject | None
    gate: JsonObject | None
    halt: JsonObject | None
    cost: JsonObject
    change: JsonObject | None
    landing: JsonObject | None
    waits_on: tuple[WaitOn, ...]
    waiting: str | None
    pool: PoolView | None
    version: JsonObject | None
    next_tick: str
    # The person's reject that began the current run: at, by, to, note.
    rejected: JsonObject | None = None
    # The features' keys (`Feature.explain`), each one's own, and the
    # lines they print; in the JSON at the top level, and only when set.
    features: JsonObject = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    __getitem__ = deprecated_getitem

    def to_dict(self) -> dict[str, object]:
        out = json_fields(self, skip=frozenset({"features", "notes"}))
        out.update((key, _plain(value)) for key, value in self.features.items())
        if self.notes:
            out["notes"] = list(self.notes)
        return out


@dataclass(frozen=True, slots=True)
class HistoryRow:
    """One transition of `history()`, a row of `history --json`."""

    task: str
    seq: int
    from_state: str | None
    to_state: str
    event: str
    actor: str | None
    reason: str | None
    note: str | None
    at: str | None

    __getitem__ = deprecated_getitem

    def to_dict(self) -> dict[str, object]:
        return json_fields(self)


@dataclass(frozen=True, slots=True)
class ScoreRow:
    """One scored attempt of `scores()`, a row of `scores --json`."""

    stage: str
    attempt: int
    run: int
    score: float | None
    passed: bool | None = field(metadata=_PASS)
    outcome: str | None
    cost_usd: float | None
    at: str | None

    __getitem__ = deprecated_getitem

    def to_dict(self) -> dict[str, object]:
        return json_fields(self)


@dataclass(frozen=True, slots=True)
class PoolView:
    """One pool of `pools()`, as `pool list --json`."""

    pool: str
    configured: bool
    running: int
    max_running: int | None
    spent_today_usd: float
    max_usd_per_day: float | None
    paused: bool
    paused_until: str | None
    seconds_left: float | None
    pause_reason: str | None

    __getitem__ = deprecated_getitem

    def to_dict(self) -> dict[str, object]:
        return json_fields(self)


@dataclass(frozen=True, slots=True)
class VersionView:
    """One version of a pipeline (`version` null: its unfinished tasks from
    before versions were recorded): whether this host's config loads it now,
    when and by which host it was first recorded (null: not yet), and how
    many unfinished tasks run it, by stage."""

    version: str | None
    current: bool
    first_seen: str | None
    host: str | None
    unfinished: int
    stages: JsonObject

    def to_dict(self) -> dict[str, object]:
        out = json_fields(self)
        out["stages"] = dict(self.stages)
        return out


@dataclass(frozen=True, slots=True)
class PipelineView:
    """One pipeline of `pipelines()`, as `pipelines --json`: its current
    version (null when the config no longer has the pipeline) and versions."""

    pipeline: str
    configured: bool
    current: str | None
    versions: tuple[VersionView, ...]

    def to_dict(self) -> dict[str, object]:
        return json_fields(self)


__all__ = [
    "ExplainView",
    "GateChange",
    "GateFacts",
    "HistoryRow",
    "JsonObject",
    "PipelineView",
    "PoolView",
    "ScoreRow",
    "TaskRow",
    "TaskView",
    "Transition",
    "VersionView",
    "Wait",
    "WaitOn",
    "of_json",
]
