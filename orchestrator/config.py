"""`orchestrator.toml` → frozen Settings.

Everything is validated up front, so the engine can trust the shapes it is
given, and every mistake is reported as `FILE: dotted.key: problem` (exit 78):
a typo in a cron-driven config must be found by `doctor` or the first tick,
not an hour later when an agent finishes.

The module stays on the standard library (plus the pure domain): a tick that
finds its lock busy loads the config and must exit before SQLAlchemy or click
would have been imported.
"""

from __future__ import annotations

import hashlib
import math
import os
import tomllib
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, cast

from orchestrator.agents.config import AGENT_DEFAULTS, AGENT_KEYS, agent_settings
from orchestrator.domain.plateau import PlateauPolicy
from orchestrator.domain.slug import slug_problem
from orchestrator.errors import ConfigError
from orchestrator.events.hooks import HookConfig, parse_hooks

if TYPE_CHECKING:
    from orchestrator.agents.output import OutputFormat
from orchestrator.guard_config import GUARD_KEYS, Backoff, guard_defaults, read_guards

DEFAULT_CONFIG_NAME = "orchestrator.toml"
DEFAULT_DATABASE = "sqlite:///orchestrator.db"
COMPLETE = "complete"

CONFIG_ENV = "ORCHESTRATOR_CONFIG"
DB_URL_ENV = "ORCHESTRATOR_DB_URL"

StdinMode = Literal["none", "prompt"]
Affinity = Literal["host", "any"]

_TOP_KEYS = ("orchestrator", "defaults", "pipelines", "hooks")
_ORCHESTRATOR_KEYS = (
    "database",
    "workspace_root",
    "lock_file",
    "state_root",
    "lease_seconds",
    "retry_interval",
    "max_interrupts",
    "env_deny",
    "affinity",
    "busy_timeout",
    "reconnect_seconds",
    "output_cap_bytes",
    "kill_grace_seconds",
)
_DEFAULTS_KEYS = (
    "max_attempts",
    "timeout_seconds",
    "pass_score",
    "plateau",
    "gate",
    "stdin",
    "env",
    "worker_ok_exit",
    *AGENT_KEYS,
    *GUARD_KEYS,
)
_PIPELINE_KEYS = ("setup", "stages")
_STAGE_KEYS = (
    "name",
    "gate",
    "worker",
    "verifier",
    "stdin",
    "prompt",
    "env",
    "max_attempts",
    "timeout_seconds",
    "pass_score",
    "plateau",
    "worker_ok_exit",
    *AGENT_KEYS,
    *GUARD_KEYS,
)
_PLATEAU_KEYS = ("patience", "min_delta", "mode", "min_attempts")


@dataclass(frozen=True, slots=True)
class StageConfig:
    """One stage with the defaults already folded in, so callers never merge."""

    name: str
    worker: tuple[str, ...] | None
    verifier: tuple[str, ...] | None
    gate: bool
    max_attempts: int
    timeout_seconds: float
    pass_score: float
    plateau: PlateauPolicy
    prompt: Path | None
    stdin: StdinMode
    env: tuple[tuple[str, str], ...]
    # Worker exit statuses that still go on to the verifier: a linter that
    # exits 1 while findings remain has done its work, the verifier judges it.
    worker_ok_exit: frozenset[int] = frozenset({0})
    # How to read the worker's and the verifier's stdout (`agents.output`).
    output: OutputFormat = "text"
    verifier_output: OutputFormat = "text"
    # Spending at this stage past which the task halts as `budget`.
    max_cost_usd: float | None = None
    # Names taken from the tick's environment for this stage only, even
    # when `env_deny` keeps them from every other stage.
    secrets: tuple[str, ...] = ()
    # Runaway guards and strict verdicts (`guard_config`).
    strict_verdict: bool = False
    halt_after_no_change: int | None = None
    retry_exit_codes: frozenset[int] = frozenset()
    backoff: Backoff = field(default_factory=Backoff)


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """An ordered list of stages; order is the only link between them."""

    name: str
    stages: tuple[StageConfig, ...]
    setup: tuple[str, ...] | None

    def stage(self, name: str) -> StageConfig | None:
        """None lets the engine halt a task as `unknown_stage` instead of crashing."""
        for stage in self.stages:
            if stage.name == name:
                return stage
        return None

    def first_stage(self) -> str:
        return self.stages[0].name

    @property
    def stage_names(self) -> tuple[str, ...]:
        return tuple(stage.name for stage in self.stages)


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a command needs to know, with paths already absolute."""

    config_path: Path | None
    base_dir: Path
    database_url: str
    workspace_root: Path
    state_root: Path
    lock_file: Path
    lease_seconds: float = 900.0
    retry_interval: float = 60.0
    max_interrupts: int = 3
    busy_timeout: float = 30.0
    reconnect_seconds: float = 60.0
    output_cap_bytes: int = 1_048_576
    kill_grace_seconds: float = 5.0
    affinity: Affinity = "host"
    env_deny: tuple[str, ...] = ()
    # A read-only view, so a frozen Settings cannot be changed through it.
    pipelines: Mapping[str, PipelineConfig] = field(
        default_factory=lambda: types.MappingProxyType({}), hash=False
    )
    fingerprint: str = ""
    hooks: tuple[HookConfig, ...] = ()  # [[hooks]]: commands told about events

    def pipeline(self, name: str) -> PipelineConfig | None:
        return self.pipelines.get(name)


# --------------------------------------------------------------------------
# Finding and reading the file


def find_config(explicit: str | Path | None, environ: Mapping[str, str], cwd: Path) -> Path | None:
    """Return the config to use, or None; a file the user named must exist.

    An empty ORCHESTRATOR_CONFIG counts as unset, as shells make `VAR=` easy
    to leave behind. Only the current folder is searched (no walking up):
    cron runs with an arbitrary cwd, and a config picked up from a parent
    folder would be a surprise.
    """
    if explicit is not None and str(explicit) != "":
        path = _absolute(Path(explicit), cwd)
        if not path.exists():
            raise ConfigError(f"{path}: config file not found (given by --config)")
        return path
    from_env = environ.get(CONFIG_ENV, "")
    if from_env:
        path = _absolute(Path(from_env), cwd)
        if not path.exists():
            raise ConfigError(f"{path}: config file not found (given by {CONFIG_ENV})")
        return path
    local = _absolute(Path(DEFAULT_CONFIG_NAME), cwd)
    return local if local.is_file() else None


def config_fingerprint(path: Path | None) -> str:
    """Hash the file so a long tick can notice an edit and stop claiming.

    A file that vanished or became unreadable gets "" rather than an error:
    the caller only compares fingerprints, and a difference is the signal.
    """
    if path is None:
        return ""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def load_settings(
    *,
    config: str | Path | None = None,
    db_url: str | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    require_config: bool = False,
) -> Settings:
    """Find, read and validate the config; apply --db and the environment."""
    env = os.environ if environ is None else environ
    here = _absolute(Path.cwd() if cwd is None else cwd, Path.cwd())
    path = find_config(config, env, here)
    if path is None:
        if require_config:
            raise ConfigError(
                "no orchestrator.toml found (looked for --config, ORCHESTRATOR_CONFIG, "
                "./orchestrator.toml); run `orchestrator init`"
            )
        data: dict[str, Any] = {}
        fingerprint = ""
        base_dir = here
    else:
        raw = _read(path)
        fingerprint = hashlib.sha256(raw).hexdigest()
        data = _parse(path, raw)
        base_dir = path.parent
    return _Loader(path, base_dir).settings(data, db_url, env, here, fingerprint)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        raise ConfigError(f"{path}: cannot read the config file: {reason}") from exc


def _parse(path: Path, raw: bytes) -> dict[str, Any]:
    try:
        # utf-8-sig: a BOM left by a Windows editor is harmless, not a syntax error.
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text: {exc}") from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc


def _absolute(path: Path, base: Path) -> Path:
    """Absolute and `..`-free, without resolving symlinks (they are the user's layout)."""
    return Path(os.path.normpath(base.absolute() / path.expanduser()))


# --------------------------------------------------------------------------
# Database URL


def resolve_database_url(url: str, base: Path) -> str:
    """Anchor a relative SQLite path at `base`, so the database does not follow the cwd.

    `sqlite:///x.db` is relative and becomes `sqlite:////abs/x.db`; the query
    string is kept. In-memory databases, SQLite URI filenames (`file:`),
    absolute paths and other databases are returned unchanged.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.split("+", 1)[0].lower() != "sqlite" or not rest.startswith("/"):
        return url
    location, qmark, query = rest[1:].partition("?")
    if location in ("", ":memory:") or location.startswith(("/", "file:")):
        return url
    # SQLAlchemy percent-decodes the database part, so the folder we add must be
    # encoded; the user's own part already is.
    anchor = str(base).replace("%", "%25").replace("?", "%3F")
    absolute = os.path.normpath(f"{anchor.rstrip('/')}/{location}")
    return f"{scheme}:///{absolute}{qmark}{query}"


# --------------------------------------------------------------------------
# Validation


def _key(parent: str, name: str) -> str:
    """TOML-style dotted key; names that are not bare keys are quoted."""
    bare = name != "" and all(ch.isascii() and (ch.isalnum() or ch in "-_") for ch in name)
    part = name if bare else '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"{parent}.{part}" if parent else part


def _show(value: object) -> str:
    """A value as the user wrote it in TOML, short enough for one error line."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class _Loader:
    """Walks the parsed TOML once, turning it into Settings or a ConfigError."""

    def __init__(self, path: Path | None, base_dir: Path) -> None:
        self.file = path
        self.base_dir = base_dir

    # errors ----------------------------------------------------------------

    def fail(self, key: str, problem: str) -> NoReturn:
        where = str(self.file) if self.file is not None else "configuration"
        raise ConfigError(f"{where}: {key}: {problem}")

    def expected(self, key: str, what: str, value: object) -> NoReturn:
        self.fail(key, f"expected {what}, got {_show(value)}")

    def table(self, value: object, key: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.expected(key, "a table", value)
        unknown = [name for name in value if name not in allowed]
        if unknown:
            import difflib  # only on the error path

            name = unknown[0]
            close = [a for a in allowed if a.startswith(name) or name.startswith(a)]
            close = close or difflib.get_close_matches(name, allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            self.fail(
                _key(key, name),
                f"unknown key{hint}; allowed: {', '.join(allowed)}",
            )
        return cast(dict[str, Any], value)

    # scalars ---------------------------------------------------------------

    def integer(self, value: object, key: str, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.expected(key, f"an integer >= {minimum}", value)
        return value

    def number(
        self,
        value: object,
        key: str,
        *,
        low: float,
        high: float | None = None,
        low_inclusive: bool = True,
    ) -> float:
        """A finite float; TOML's inf and nan never make sense as limits here."""
        if high is not None:
            what = f"a number in [{low:g}, {high:g}]"
        else:
            what = f"a number {'>=' if low_inclusive else '>'} {low:g}"
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.expected(key, what, value)
        number = float(value)
        ok = math.isfinite(number) and (number >= low if low_inclusive else number > low)
        if not ok or (high is not None and number > high):
            self.expected(key, what, value)
        return number

    def boolean(self, value: object, key: str) -> bool:
        if not isinstance(value, bool):
            self.expected(key, "true or false", value)
        return value

    def string(self, value: object, key: str) -> str:
        if not isinstance(value, str) or value == "":
            self.expected(key, "a non-empty string", value)
        if "\x00" in value:
            self.fail(key, "NUL characters are not allowed")
        return value

    def choice(self, value: object, key: str, choices: tuple[str, ...]) -> str:
        if not isinstance(value, str) or value not in choices:
            self.expected(key, " or ".join(repr(c) for c in choices), value)
        return value

    def file_path(self, value: object, key: str) -> Path:
        return _absolute(Path(self.string(value, key)), self.base_dir)

    def argv(self, value: object, key: str) -> tuple[str, ...]:
        """Commands are never run through a shell unless the user writes one."""
        if isinstance(value, str):
            self.fail(
                key,
                f'got the string {_show(value)}; use an argv list, e.g. ["sh", "-c", "..."]',
            )
        if not isinstance(value, list) or not value:
            self.expected(key, "a non-empty list of strings", value)
        for index, item in enumerate(value):
            if not isinstance(item, str):
                self.expected(f"{key}[{index}]", "a string", item)
            if "\x00" in item:
                self.fail(f"{key}[{index}]", "NUL characters are not allowed")
        if value[0] == "":
            self.fail(f"{key}[0]", "the program name must not be empty")
        return tuple(value)

    def string_list(self, value: object, key: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            self.expected(key, "a list of strings", value)
        return tuple(self.string(item, f"{key}[{i}]") for i, item in enumerate(value))

    def env(self, value: object, key: str) -> dict[str, str]:
        table = cast(dict[str, Any], value) if isinstance(value, dict) else None
        if table is None:
            self.expected(key, 'a table of NAME = "value" strings', value)
        result: dict[str, str] = {}
        for name, item in table.items():
            item_key = _key(key, name)
            if name == "" or "=" in name or "\x00" in name:
                self.fail(item_key, "not a valid environment variable name")
            if not isinstance(item, str):
                self.expected(item_key, "a string", item)
            if "\x00" in item:
                self.fail(item_key, "NUL characters are not allowed")
            result[name] = item
        return result

    def plateau(self, value: object, key: str, base: PlateauPolicy) -> PlateauPolicy:
        """Key by key over `base`: a stage may change patience and keep min_delta."""
        table = self.table(value, key, _PLATEAU_KEYS)
        patience = base.patience
        min_delta = base.min_delta
        mode = base.mode
        min_attempts = base.min_attempts
        if "patience" in table:
            patience = self.integer(table["patience"], _key(key, "patience"), 1)
        if "min_delta" in table:
            min_delta = self.number(table["min_delta"], _key(key, "min_delta"), low=0.0)
        if "mode" in table:
            mode = cast(
                Literal["abs", "rel"], self.choice(table["mode"], _key(key, "mode"), ("abs", "rel"))
            )
        if "min_attempts" in table:
            min_attempts = self.integer(table["min_attempts"], _key(key, "min_attempts"), 1)
        try:
            return PlateauPolicy(
                patience=patience, min_delta=min_delta, mode=mode, min_attempts=min_attempts
            )
        except ValueError as exc:
            self.fail(key, str(exc))

    # sections --------------------------------------------------------------

    def settings(
        self,
        data: dict[str, Any],
        db_url: str | None,
        environ: Mapping[str, str],
        cwd: Path,
        fingerprint: str,
    ) -> Settings:
        top = self.table(data, "", _TOP_KEYS)
        orch = self.table(top.get("orchestrator", {}), "orchestrator", _ORCHESTRATOR_KEYS)
        defaults = self.defaults(top.get("defaults", {}))
        pipelines = self.pipelines(top.get("pipelines", {}), defaults)

        def get(name: str) -> tuple[object, str]:
            return orch.get(name), _key("orchestrator", name)

        database = self.database(orch, db_url, environ, cwd)
        value, key = get("affinity")
        affinity = cast(
            Affinity, "host" if value is None else self.choice(value, key, ("host", "any"))
        )
        value, key = get("env_deny")
        env_deny = () if value is None else self.string_list(value, key)

        def pathed(name: str, default: str) -> Path:
            value, key = get(name)
            return self.file_path(default if value is None else value, key)

        def num(name: str, default: float, *, low: float, low_inclusive: bool = True) -> float:
            value, key = get(name)
            if value is None:
                return default
            return self.number(value, key, low=low, low_inclusive=low_inclusive)

        def int_(name: str, default: int) -> int:
            value, key = get(name)
            return default if value is None else self.integer(value, key, 1)

        return Settings(
            config_path=self.file,
            base_dir=self.base_dir,
            database_url=database,
            workspace_root=pathed("workspace_root", "tasks"),
            state_root=pathed("state_root", "state"),
            lock_file=pathed("lock_file", "orchestrator.lock"),
            lease_seconds=num("lease_seconds", 900.0, low=0.0, low_inclusive=False),
            retry_interval=num("retry_interval", 60.0, low=0.0),
            max_interrupts=int_("max_interrupts", 3),
            busy_timeout=num("busy_timeout", 30.0, low=0.0),
            reconnect_seconds=num("reconnect_seconds", 60.0, low=0.0),
            output_cap_bytes=int_("output_cap_bytes", 1_048_576),
            kill_grace_seconds=num("kill_grace_seconds", 5.0, low=0.0),
            affinity=affinity,
            env_deny=env_deny,
            pipelines=types.MappingProxyType(pipelines),
            fingerprint=fingerprint,
            hooks=parse_hooks(self, top.get("hooks")),
        )

    def database(
        self, orch: dict[str, Any], db_url: str | None, environ: Mapping[str, str], cwd: Path
    ) -> str:
        """--db > ORCHESTRATOR_DB_URL > the file > beside the file.

        A path typed on the command line or exported in a shell means "here",
        so it is anchored at the cwd; one written in the file means "beside
        this file". An empty --db or environment value counts as unset.
        """
        if db_url:
            return resolve_database_url(db_url, cwd)
        from_env = environ.get(DB_URL_ENV, "")
        if from_env:
            return resolve_database_url(from_env, cwd)
        value = orch.get("database")
        url = DEFAULT_DATABASE if value is None else self.string(value, "orchestrator.database")
        return resolve_database_url(url, self.base_dir)

    def defaults(self, value: object) -> dict[str, Any]:
        """Validated stage defaults, in the shape `stage` merges over."""
        table = self.table(value, "defaults", _DEFAULTS_KEYS)
        result: dict[str, Any] = {
            "gate": False,
            "max_attempts": 5,
            "timeout_seconds": 1800.0,
            "pass_score": 0.0,
            "plateau": PlateauPolicy(),
            "stdin": "none",
            "env": {},
            "worker_ok_exit": frozenset({0}),
            **AGENT_DEFAULTS,
            **guard_defaults(),
        }
        self.stage_scalars(table, "defaults", result)
        return result

    def stage_scalars(self, table: dict[str, Any], key: str, into: dict[str, Any]) -> None:
        """The keys a stage shares with [defaults]; each overrides what `into` holds."""
        if "gate" in table:
            into["gate"] = self.boolean(table["gate"], _key(key, "gate"))
        if "max_attempts" in table:
            into["max_attempts"] = self.integer(table["max_attempts"], _key(key, "max_attempts"), 1)
        if "timeout_seconds" in table:
            into["timeout_seconds"] = self.number(
                table["timeout_seconds"], _key(key, "timeout_seconds"), low=0.0, low_inclusive=False
            )
        if "pass_score" in table:
            into["pass_score"] = self.number(
                table["pass_score"], _key(key, "pass_score"), low=0.0, high=1.0
            )
        if "plateau" in table:
            into["plateau"] = self.plateau(table["plateau"], _key(key, "plateau"), into["plateau"])
        if "stdin" in table:
            into["stdin"] = self.choice(table["stdin"], _key(key, "stdin"), ("none", "prompt"))
        if "env" in table:
            into["env"] = {**into["env"], **self.env(table["env"], _key(key, "env"))}
        if "worker_ok_exit" in table:
            into["worker_ok_exit"] = self.exit_statuses(
                table["worker_ok_exit"], _key(key, "worker_ok_exit")
            )
        into.update(agent_settings(self, table, key))
        read_guards(self, table, key, into)

    def exit_statuses(self, value: object, key: str) -> frozenset[int]:
        what = "a list of exit statuses (integers 0-255) that includes 0"
        if not isinstance(value, list):
            self.expected(key, what, value)
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item <= 255:
                self.expected(key, what, value)
        if 0 not in value:
            self.expected(key, what, value)
        return frozenset(value)

    def pipelines(self, value: object, defaults: dict[str, Any]) -> dict[str, PipelineConfig]:
        if not isinstance(value, dict):
            self.expected("pipelines", "a table of pipelines", value)
        result: dict[str, PipelineConfig] = {}
        for name, body in cast(dict[str, Any], value).items():
            key = _key("pipelines", name)
            problem = slug_problem(name)
            if problem is not None:
                self.fail(key, f"pipeline name: {problem}")
            result[name] = self.pipeline(name, body, key, defaults)
        return result

    def pipeline(
        self, name: str, value: object, key: str, defaults: dict[str, Any]
    ) -> PipelineConfig:
        table = self.table(value, key, _PIPELINE_KEYS)
        setup = None if "setup" not in table else self.argv(table["setup"], _key(key, "setup"))
        stages_key = _key(key, "stages")
        raw_stages = table.get("stages")
        if raw_stages is None or raw_stages == []:
            self.fail(stages_key, "a pipeline needs at least one stage ([[pipelines.NAME.stages]])")
        if not isinstance(raw_stages, list):
            self.expected(stages_key, "an array of tables ([[pipelines.NAME.stages]])", raw_stages)
        stages: list[StageConfig] = []
        seen: dict[str, int] = {}
        for index, raw in enumerate(raw_stages):
            stage_key = f"{stages_key}[{index}]"
            named = raw.get("name") if isinstance(raw, dict) else None
            if isinstance(named, str) and named != COMPLETE and slug_problem(named) is None:
                # The index alone makes a reader count tables in the file.
                stage_key += f" ({named})"
            stage = self.stage(raw, stage_key, defaults)
            if stage.name in seen:
                self.fail(
                    _key(stage_key, "name"),
                    f"duplicate stage name {stage.name!r} (also {stages_key}[{seen[stage.name]}])",
                )
            seen[stage.name] = index
            stages.append(stage)
        return PipelineConfig(name=name, stages=tuple(stages), setup=setup)

    def stage(self, value: object, key: str, defaults: dict[str, Any]) -> StageConfig:
        table = self.table(value, key, _STAGE_KEYS)
        if "name" not in table:
            self.fail(_key(key, "name"), "missing: every stage needs a name")
        name = self.string(table["name"], _key(key, "name"))
        problem = slug_problem(name)
        if problem is not None:
            self.fail(_key(key, "name"), f"stage name: {problem}")
        if name == COMPLETE:
            self.fail(_key(key, "name"), f"{COMPLETE!r} is reserved for finished tasks")
        merged = dict(defaults)
        self.stage_scalars(table, key, merged)
        worker = None if "worker" not in table else self.argv(table["worker"], _key(key, "worker"))
        verifier = (
            None if "verifier" not in table else self.argv(table["verifier"], _key(key, "verifier"))
        )
        if worker is None and verifier is None:
            self.fail(key, f"stage {name!r} needs a worker, a verifier, or both")
        prompt = (
            None if "prompt" not in table else self.file_path(table["prompt"], _key(key, "prompt"))
        )
        if merged["stdin"] == "prompt" and prompt is None:
            inherited = "" if "stdin" in table else " (inherited from [defaults])"
            self.fail(
                _key(key, "stdin"),
                f'stdin = "prompt"{inherited} needs a prompt template (prompt = "...")',
            )
        return StageConfig(
            name=name,
            worker=worker,
            verifier=verifier,
            gate=merged["gate"],
            max_attempts=merged["max_attempts"],
            timeout_seconds=merged["timeout_seconds"],
            pass_score=merged["pass_score"],
            plateau=merged["plateau"],
            prompt=prompt,
            stdin=merged["stdin"],
            env=tuple(merged["env"].items()),
            worker_ok_exit=merged["worker_ok_exit"],
            output=merged["output"],
            verifier_output=merged["verifier_output"],
            max_cost_usd=merged["max_cost_usd"],
            secrets=merged["secrets"],
            strict_verdict=merged["strict_verdict"],
            halt_after_no_change=merged["halt_after_no_change"],
            retry_exit_codes=merged["retry_exit_codes"],
            backoff=merged["backoff"],
        )
