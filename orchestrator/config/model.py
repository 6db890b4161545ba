"""What a config becomes: the frozen data classes.

The keys each table accepts are declared by their Sections (`config.core`
and each feature's config module); a stage or pipeline key that is not
part of a built object is a field here of the same name.
"""

from __future__ import annotations

import collections
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.config.selection import OnHalt
from orchestrator.domain.backoff import Backoff
from orchestrator.domain.plateau import PlateauPolicy

if TYPE_CHECKING:
    from orchestrator.agents.output import OutputFormat
    from orchestrator.events.hooks import HookConfig
    from orchestrator.features.landing.config import LandConfig
    from orchestrator.features.pools.config import PoolConfig
    from orchestrator.features.sandbox.config import SandboxConfig

DEFAULT_CONFIG_NAME = "orchestrator.toml"
DEFAULT_DATABASE = "sqlite:///orchestrator.db"
COMPLETE = "complete"
CONFIG_ENV = "ORCHESTRATOR_CONFIG"
DB_URL_ENV = "ORCHESTRATOR_DB_URL"
StdinMode = Literal["none", "prompt"]
Affinity = Literal["host", "any"]


def _no_sandbox() -> SandboxConfig:
    """Commands run on the host. Imported when called, as `_no_landing`:
    the sandbox's config module imports `config.schema`."""
    from orchestrator.features.sandbox.config import SandboxConfig

    return SandboxConfig()


def sandbox_config(**fields: Any) -> SandboxConfig:
    """A stage's or pipeline's `SandboxConfig` from its fields, for a reader
    that rebuilds one (a kept pipeline version) without importing the
    sandbox's package: features do not import each other."""
    from orchestrator.features.sandbox.config import SandboxConfig

    return SandboxConfig(**fields)


@dataclass(frozen=True, slots=True)
class StageConfig:
    """One stage with the defaults already folded in, so callers never merge."""

    name: str
    worker: tuple[str, ...] | None
    verifier: tuple[str, ...] | None
    gate: bool | Literal["auto"]  # "auto": a feature may open it (`TickHooks.open_gate`)
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
    pending_timeout: float = 3600.0  # a run of pending verdicts, at most (seconds)
    # The `[pools.NAME]` whose caps and pauses this stage's attempts share.
    pool: str | None = None
    # MiB an attempt of it reserves on its host (`features.memory`); None:
    # what its agent kind holds (`AgentKind.memory_mb`), 0 for a command.
    memory_mb: int | None = None
    # Where its worker and verifier run (`features/sandbox/`).
    sandbox: SandboxConfig = field(default_factory=_no_sandbox)
    # The worker resumes the agent session of the stage's previous attempt.
    resume: bool = False
    # Best-attempt restore and verifier noise (`config.selection`).
    on_halt: OnHalt = "last"
    verifier_samples: int = 1
    # Best of N (`features/candidates`): a claim opens this many candidates, each
    # in its own worktree; 1 is one attempt at a time.
    candidates: int = 1
    # What the features' extension Sections built (`Section.of`), by name.
    extras: Mapping[str, object] = field(
        default_factory=lambda: types.MappingProxyType({}), hash=False
    )

    @property
    def confined(self) -> bool:
        """Whether its worker and verifier must run inside walls: the
        engine runs neither unless a feature wraps it (`ext.model.Command`)."""
        return self.sandbox.enabled


def _no_landing() -> LandConfig:
    """A pipeline that does not land. Imported when called: landing's config
    module imports `config.schema`, so importing it with this package would
    start landing's import before this module is done."""
    from orchestrator.features.landing.config import LandConfig

    return LandConfig()


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """An ordered list of stages; order is the only link between them."""

    name: str
    stages: tuple[StageConfig, ...]
    setup: tuple[str, ...] | None
    # A task is a branch: with `repository`, each task's workspace is a git
    # worktree of it on `task/<slug>` from `base` (None: the branch checked
    # out there when the task is added), and each passed stage a commit.
    repository: Path | None = None
    base: str | None = None
    commit_author: str = "orchestrator <orchestrator@localhost>"
    # A finished task's worktree is removed this long after it finished
    # (its branch stays); None keeps worktrees until `prune --finished`.
    keep_worktree_days: float | None = None
    # What happens once the last stage passes (`land`, `landing.config`).
    landing: LandConfig = field(default_factory=_no_landing)
    # Where `setup` runs; the stages inherit it unless they set their own.
    sandbox: SandboxConfig = field(default_factory=_no_sandbox)
    # What the features' extension Sections built (`Section.of`), by name.
    extras: Mapping[str, object] = field(
        default_factory=lambda: types.MappingProxyType({}), hash=False
    )

    @property
    def confined(self) -> bool:
        """Whether `setup` must run inside walls, as `StageConfig.confined`."""
        return self.sandbox.enabled

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
    # `[orchestrator] env`: variables every stage, setup and landing is
    # given (from the environment, else `env_file`); never a name `env_deny`,
    # `secrets` or `land_secrets` keeps (the loader refuses it).
    env: tuple[str, ...] = ()
    # A read-only view, so a frozen Settings cannot be changed through it.
    pipelines: Mapping[str, PipelineConfig] = field(
        default_factory=lambda: types.MappingProxyType({}), hash=False
    )
    fingerprint: str = ""
    hooks: tuple[HookConfig, ...] = ()  # [[hooks]]: commands told about events
    # Where the stages' secrets are found when the environment lacks them
    # (cron's); read by the tick (`config.envfile`), never by other commands.
    env_file: Path | None = None
    env_file_values: Mapping[str, str] = field(
        default_factory=lambda: types.MappingProxyType({}), hash=False, compare=False, repr=False
    )
    pools: Mapping[str, PoolConfig] = field(
        default_factory=lambda: types.MappingProxyType({}), hash=False
    )
    # What the features' extension Sections read of their own top-level
    # tables (`Section.table_of`), by table name.
    extras: Mapping[str, object] = field(
        default_factory=lambda: types.MappingProxyType({}), hash=False
    )

    def pipeline(self, name: str) -> PipelineConfig | None:
        return self.pipelines.get(name)

    def secret_sources(self, environ: Mapping[str, str]) -> Mapping[str, str]:
        """Where a stage's `secrets` are looked up: the environment first
        (an exported value overrides the file, as with dotenv), then `env_file`."""
        return collections.ChainMap(dict(environ), dict(self.env_file_values))

    def shared_env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The `env` names' values (`secret_sources`: the environment, then
        `env_file`); a name set in neither is left out."""
        sources = self.secret_sources(environ)
        return {name: sources[name] for name in self.env if name in sources}

    @property
    def child_deny(self) -> tuple[str, ...]:
        """What no child inherits: `env_deny` and every stage's `secrets`.
        A secret goes back only into the stages that name it
        (`agents.runtime.stage_extra_env`), never to another stage, a
        `setup` or a hook, whether or not `env_deny` holds it too."""
        names = {name for p in self.pipelines.values() for st in p.stages for name in st.secrets}
        return self.env_deny + tuple(sorted(names - set(self.env_deny)))
