"""The config schema: each key declared once, by the module that owns it.

A `Key` carries everything the rest of the system needs to know about one
key (its kind, default, the tables it may sit in, its line in the
reference), so the reader, the unknown-key lists and
`docs/reference/configuration.md` cannot drift apart. A `Section` is the
keys one feature owns, with what they build and the rules that span keys.

Kinds read one written value through `Checks`, the loader's validation
helpers, so every error keeps the loader's `FILE: dotted.key: problem`
format. Standard library only: the busy-lock path loads the config.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, NoReturn, Protocol, TypeVar

T = TypeVar("T")
S = TypeVar("S")
T_co = TypeVar("T_co", covariant=True)

# The tables a key may sit in. `defaults`, `stage` and `pipeline` are the
# inherited ones ([defaults] -> [pipelines.NAME] -> a stage); the others
# are a Section's own table (`Section.table`).
DEFAULTS = "defaults"
STAGE = "stage"
PIPELINE = "pipeline"

Scope = frozenset[str]
STAGE_KEY: Scope = frozenset({DEFAULTS, STAGE})  # a stage's, and [defaults]'
STAGE_ONLY: Scope = frozenset({STAGE})
PIPELINE_ONLY: Scope = frozenset({PIPELINE})
INHERITED: Scope = frozenset({DEFAULTS, PIPELINE, STAGE})  # the pipeline's sits between


class Checks(Protocol):
    """What a kind may ask of the loader: one TOML value of a known shape,
    or a `ConfigError` naming its dotted key."""

    def fail(self, key: str, problem: str) -> NoReturn: ...

    def expected(self, key: str, what: str, value: object) -> NoReturn: ...

    def table(self, value: object, key: str, allowed: tuple[str, ...]) -> dict[str, Any]: ...

    def integer(self, value: object, key: str, minimum: int) -> int: ...

    def number(
        self,
        value: object,
        key: str,
        *,
        low: float,
        high: float | None = None,
        low_inclusive: bool = True,
    ) -> float: ...

    def boolean(self, value: object, key: str) -> bool: ...

    def string(self, value: object, key: str) -> str: ...

    def choice(self, value: object, key: str, choices: tuple[str, ...]) -> str: ...

    def file_path(self, value: object, key: str) -> Path: ...

    def argv(self, value: object, key: str) -> tuple[str, ...]: ...

    def string_list(self, value: object, key: str) -> tuple[str, ...]: ...

    def env(self, value: object, key: str) -> dict[str, str]: ...

    def exit_statuses(self, value: object, key: str) -> frozenset[int]: ...

    def names(self, table: str) -> frozenset[str]:
        """The NAMEs of a top-level `[table.NAME]` (a stage's `pool` must name one)."""
        ...


class Kind(Protocol[T_co]):
    """How one written value is read; `inherited` is what the key held
    before this table (a stage's `env` merges over it)."""

    def read(self, checks: Checks, value: object, key: str, inherited: Any) -> T_co: ...


@dataclass(frozen=True)
class Integer:
    minimum: int = 1
    maximum: int | None = None  # past it: "at most N, not M"

    def read(self, checks: Checks, value: object, key: str, inherited: Any) -> int:
        number = checks.integer(value, key, self.minimum)
        if self.maximum is not None and number > self.maximum:
            checks.fail(key, f"at most {self.maximum}, not {number}")
        return number


@dataclass(frozen=True)
class Number:
    low: float
    high: float | None = None
    low_inclusive: bool = True

    def read(self, checks: Checks, value: object, key: str, inherited: Any) -> float:
        return checks.number(
            value, key, low=self.low, high=self.high, low_inclusive=self.low_inclusive
        )


@dataclass(frozen=True)
class Seconds:
    """A wait from 0 to `most` seconds; past it the message names the bound."""

    most: float
    most_name: str

    def read(self, checks: Checks, value: object, key: str, inherited: Any) -> float:
        seconds = checks.number(value, key, low=0.0)
        if seconds > self.most:
            checks.fail(key, f"{seconds:g} seconds is more than {self.most_name} ({self.most:.0f})")
        return seconds


@dataclass(frozen=True)
class Bool:
    def read(self, checks: Checks, value: object, key: str, inherited: Any) -> bool:
        return checks.boolean(value, key)


@dataclass(frozen=True)
class Choice:
    choices: tuple[str, ...]

    def read(self, checks: Checks, value: object, key: str, inherited: Any) -> str:
        return checks.choice(value, key, self.choices)


@dataclass(frozen=True)
class Text:
    def read(self, checks: Checks, value: object, key: str, inherited: Any) -> str:
        return checks.string(value, key)


@dataclass(frozen=True)
class Strings:
    def read(self, checks: Checks, value: object, key: str, inherited: Any) -> tuple[str, ...]:
        return checks.string_list(value, key)


@dataclass(frozen=True)
class FilePath:
    """Relative to the config's folder."""

    def read(self, checks: Checks, value: object, key: str, inherited: Any) -> Path:
        return checks.file_path(value, key)


@dataclass(frozen=True)
class Argv:
    def read(self, checks: Checks, value: object, key: str, inherited: Any) -> tuple[str, ...]:
        return checks.argv(value, key)


@dataclass(frozen=True)
class Env:
    """NAME = "value" pairs, merged name by name over what is inherited."""

    def read(
        self, checks: Checks, value: object, key: str, inherited: Any
    ) -> tuple[tuple[str, str], ...]:
        return tuple({**dict(inherited or ()), **checks.env(value, key)}.items())


@dataclass(frozen=True)
class ExitStatuses:
    """The worker statuses that go on to the verifier (0 among them)."""

    def read(self, checks: Checks, value: object, key: str, inherited: Any) -> frozenset[int]:
        return checks.exit_statuses(value, key)


@dataclass(frozen=True)
class Named:
    """The NAME of a `[table.NAME]` the same file declares: a typo would
    silently leave a stage out of what the table sets."""

    table: str
    what: str

    def read(self, checks: Checks, value: object, key: str, inherited: Any) -> str:
        name = checks.string(value, key)
        known = checks.names(self.table)
        if name not in known:
            have = ", ".join(sorted(known)) or "none"
            checks.fail(
                key,
                f"unknown {self.what} {name!r} (add a [{self.table}.{name}] table; "
                f"{self.table}: {have})",
            )
        return name


@dataclass(frozen=True)
class Raw:
    """Read by the table's own reader (a pipeline's `stages`, a stage's `name`):
    declared for the key lists and the reference only."""

    def read(self, checks: Checks, value: object, key: str, inherited: Any) -> object:
        return value


@dataclass(frozen=True)
class Checked(Generic[T]):
    """A kind, then a rule on the value it read (a secret's name, a branch name)."""

    kind: Kind[T]
    rule: Callable[[Checks, T, str], None]

    def read(self, checks: Checks, value: object, key: str, inherited: Any) -> T:
        found = self.kind.read(checks, value, key, inherited)
        self.rule(checks, found, key)
        return found


@dataclass(frozen=True)
class Nested(Generic[S]):
    """An inline table read key by key over what is inherited (`plateau`,
    `backoff`): a stage may change one key and keep the others."""

    section: Section[S]
    fields: Callable[[S], Mapping[str, Any]]

    def read(self, checks: Checks, value: object, key: str, inherited: Any) -> S:
        table = checks.table(value, key, self.section.names())
        values = dict(self.fields(inherited))
        read_keys(checks, self.section.keys, table, key, values)
        if self.section.check is not None:
            self.section.check(checks, values, key)
        return self.section.built(values)


@dataclass(frozen=True)
class Key(Generic[T]):
    """One config key, declared once."""

    name: str
    kind: Kind[T]
    default: T
    doc: str  # its row's meaning in the reference
    scope: Scope
    shown: str | None = None  # the reference's default column, when `default` says it badly
    pipeline_doc: str | None = None  # its row in [pipelines.NAME], when it differs
    read_default: bool = False  # `default` is as written: read it through `kind` (a path)

    def default_text(self) -> str:
        if self.shown is not None:
            return self.shown
        return "(none)" if self.default is None else f"`{show(self.default)}`"


def show(value: object) -> str:
    """A default as TOML writes it."""
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, frozenset):  # a set of statuses: in order, as one would write it
        return show(tuple(sorted(value, key=str)))
    if isinstance(value, tuple | list):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return str(value)


class HasExtras(Protocol):
    """A config object that keeps extension Sections' values by name."""

    @property
    def extras(self) -> Mapping[str, object]: ...


_MISSING = object()


@dataclass(frozen=True)
class Section(Generic[S]):
    """The keys one feature owns.

    `table` names its own top-level table (`pools` for `[pools.NAME]`);
    without one its keys join the inherited tables their scope names.
    `build` turns the read values (by key name) into what the feature
    keeps (`field` names where: a `StageConfig`/`PipelineConfig` field);
    `check` holds the rules that span keys, run once the keys are read.
    `read_table` reads the Section's own top-level table (None when the
    file has none) into the `Settings` field of the same name.

    `extension`: a feature's Section that owns no field of the engine's
    classes. What it builds is kept in `extras[name]` of the
    `StageConfig`/`PipelineConfig` (its table's read in
    `Settings.extras[table]`), read back typed with `of`/`table_of`, so
    adding a feature's keys edits no engine class.
    """

    name: str
    keys: tuple[Key[Any], ...]
    table: str | None = None
    table_doc: str = ""
    build: Callable[[Mapping[str, Any]], S] | None = None
    field: str | None = None
    check: Callable[[Checks, dict[str, Any], str], None] | None = None
    read_table: Callable[[Checks, object], object] | None = None
    extension: bool = False

    def of(self, holder: HasExtras) -> S:
        """What this extension Section built for a stage or pipeline; its
        defaults' build for one made without it (a test's, a library
        caller's `StageConfig(...)`)."""
        found = holder.extras.get(self.name, _MISSING)
        if found is _MISSING:
            return self.built(self.defaults())
        return found  # type: ignore[return-value]

    def table_of(self, settings: HasExtras) -> object:
        """What `read_table` read of this Section's own table; None when
        the Settings were made without it."""
        return settings.extras.get(self.table or self.name)

    def names(self, scope: str | None = None) -> tuple[str, ...]:
        return tuple(k.name for k in self.keys if scope is None or scope in k.scope)

    def defaults(self, scope: str | None = None) -> dict[str, Any]:
        return {k.name: k.default for k in self.keys if scope is None or scope in k.scope}

    def built(self, values: Mapping[str, Any]) -> S:
        if self.build is None:
            raise TypeError(f"section {self.name!r} builds nothing")
        return self.build(values)


def read_keys(
    checks: Checks,
    keys: tuple[Key[Any], ...],
    table: Mapping[str, Any],
    key: str,
    into: dict[str, Any],
) -> None:
    """Each key `table` sets, read over what `into` holds (its inherited value)."""
    for item in keys:
        if item.name in table:
            into[item.name] = item.kind.read(
                checks, table[item.name], dotted(key, item.name), into.get(item.name)
            )


def dotted(parent: str, name: str) -> str:
    """TOML-style dotted key; names that are not bare keys are quoted."""
    bare = name != "" and all(ch.isascii() and (ch.isalnum() or ch in "-_") for ch in name)
    part = name if bare else '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"{parent}.{part}" if parent else part


@dataclass(frozen=True)
class Schema:
    """The Sections one load reads, the engine's first: which keys each
    table takes (in this order, as the unknown-key error lists them)."""

    sections: tuple[Section[Any], ...]
    engine_tables: tuple[str, ...] = ()  # the top-level tables the loader reads itself

    def keys(self, scope: str) -> tuple[Key[Any], ...]:
        return tuple(k for s in self.sections for k in s.keys if scope in k.scope)

    def allowed(self, scope: str) -> tuple[str, ...]:
        return tuple(k.name for k in self.keys(scope))

    def defaults(self, scope: str) -> dict[str, Any]:
        return {k.name: k.default for k in self.keys(scope)}

    def in_scope(self, scope: str) -> tuple[Section[Any], ...]:
        return tuple(s for s in self.sections if any(scope in k.scope for k in s.keys))

    def tables(self) -> tuple[Section[Any], ...]:
        """The Sections that read a top-level table of their own."""
        return tuple(s for s in self.sections if s.read_table is not None)

    def top(self) -> tuple[str, ...]:
        return self.engine_tables + tuple(s.table for s in self.tables() if s.table)
