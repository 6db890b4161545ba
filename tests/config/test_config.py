"""orchestrator.toml → Settings: the documented format, precedence, and every error."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from orchestrator.config import (
    DEFAULT_CONFIG_NAME,
    PipelineConfig,
    Settings,
    StageConfig,
    config_fingerprint,
    find_config,
    load_settings,
    resolve_database_url,
)
from orchestrator.domain.backoff import MAX_BACKOFF, Backoff
from orchestrator.domain.plateau import PlateauPolicy
from orchestrator.errors import ConfigError

FULL_EXAMPLE = """
[orchestrator]
database = "sqlite:///orchestrator.db"
workspace_root = "tasks"
lock_file = "orchestrator.lock"
state_root = "state"         # captured output, prompts, context (outside workspaces)
lease_seconds = 900          # renewed by heartbeat while an attempt runs
retry_interval = 60          # seconds before a task's second attempt in one tick
max_interrupts = 3
env_deny = ["AWS_SECRET_ACCESS_KEY"]

[defaults]                   # every stage inherits these unless it overrides
max_attempts = 5
timeout_seconds = 1800
pass_score = 0.0
plateau = { patience = 3, min_delta = 0.01, mode = "abs" }

[[pipelines.default.stages]]
name = "research"
gate = true
worker = ["claude", "-p", "--output-format", "text"]
stdin = "prompt"             # feed the rendered prompt on stdin ("none" by default)
prompt = "prompts/research.md"
verifier = ["python", "judges/verdict.py", "{workspace}"]
max_attempts = 3
"""

MINIMAL_PIPELINE = """
[[pipelines.default.stages]]
name = "only"
worker = ["true"]
"""


def write(folder: Path, text: str, name: str = DEFAULT_CONFIG_NAME) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load(path: Path, **kwargs: object) -> Settings:
    kwargs.setdefault("environ", {})
    kwargs.setdefault("cwd", path.parent)
    return load_settings(config=path, **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# A full example and the defaults


def test_full_example_parses(tmp_path: Path) -> None:
    settings = load(write(tmp_path, FULL_EXAMPLE))

    assert settings.config_path == tmp_path / DEFAULT_CONFIG_NAME
    assert settings.base_dir == tmp_path
    assert settings.database_url == f"sqlite:///{tmp_path}/orchestrator.db"
    assert settings.workspace_root == tmp_path / "tasks"
    assert settings.state_root == tmp_path / "state"
    assert settings.lock_file == tmp_path / "orchestrator.lock"
    assert settings.lease_seconds == 900.0
    assert settings.retry_interval == 60.0
    assert settings.max_interrupts == 3
    assert settings.env_deny == ("AWS_SECRET_ACCESS_KEY",)
    assert settings.affinity == "host"
    assert settings.busy_timeout == 30.0
    assert settings.output_cap_bytes == 1_048_576
    assert settings.kill_grace_seconds == 5.0

    pipeline = settings.pipeline("default")
    assert pipeline is not None
    assert pipeline.stage_names == ("research",)
    assert pipeline.setup is None
    assert settings.pipeline("nope") is None
    research = pipeline.stage("research")
    assert research == StageConfig(
        name="research",
        worker=("claude", "-p", "--output-format", "text"),
        verifier=("python", "judges/verdict.py", "{workspace}"),
        gate=True,
        max_attempts=3,
        timeout_seconds=1800.0,
        pass_score=0.0,
        plateau=PlateauPolicy(patience=3, min_delta=0.01, mode="abs"),
        prompt=tmp_path / "prompts" / "research.md",
        stdin="prompt",
        env=(),
    )
    assert isinstance(research.timeout_seconds, float)


def test_every_orchestrator_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [orchestrator]
        database = "postgresql+psycopg://u@db/orch"
        workspace_root = "/srv/work"
        state_root = "../state"
        lock_file = "locks/tick.lock"
        lease_seconds = 30.5
        retry_interval = 0
        max_interrupts = 7
        env_deny = []
        affinity = "any"
        busy_timeout = 2
        output_cap_bytes = 4096
        kill_grace_seconds = 0.5
        """,
    )
    settings = load(path)
    assert settings.database_url == "postgresql+psycopg://u@db/orch"
    assert settings.workspace_root == Path("/srv/work")
    assert settings.state_root == tmp_path.parent / "state"
    assert settings.lock_file == tmp_path / "locks" / "tick.lock"
    assert settings.lease_seconds == 30.5
    assert settings.retry_interval == 0.0
    assert settings.max_interrupts == 7
    assert settings.env_deny == ()
    assert settings.affinity == "any"
    assert settings.busy_timeout == 2.0
    assert settings.output_cap_bytes == 4096
    assert settings.kill_grace_seconds == 0.5
    assert dict(settings.pipelines) == {}


def test_no_config_file_gives_defaults(tmp_path: Path) -> None:
    settings = load_settings(environ={}, cwd=tmp_path)
    assert settings.config_path is None
    assert settings.base_dir == tmp_path
    assert settings.database_url == f"sqlite:///{tmp_path}/orchestrator.db"
    assert settings.workspace_root == tmp_path / "tasks"
    assert settings.state_root == tmp_path / "state"
    assert settings.lock_file == tmp_path / "orchestrator.lock"
    assert settings.lease_seconds == 900.0
    assert settings.affinity == "host"
    assert settings.env_deny == ()
    assert dict(settings.pipelines) == {}
    assert settings.fingerprint == ""


def test_no_config_file_with_db(tmp_path: Path) -> None:
    settings = load_settings(db_url="sqlite:///x.db", environ={}, cwd=tmp_path)
    assert settings.database_url == f"sqlite:///{tmp_path}/x.db"


def test_require_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="orchestrator init") as info:
        load_settings(environ={}, cwd=tmp_path, require_config=True)
    assert info.value.exit_code == 78
    assert "ORCHESTRATOR_CONFIG" in str(info.value)


def test_empty_file_is_valid(tmp_path: Path) -> None:
    settings = load(write(tmp_path, ""))
    assert settings.config_path == tmp_path / DEFAULT_CONFIG_NAME
    assert dict(settings.pipelines) == {}
    assert settings.fingerprint != ""


def test_defaults_are_inherited(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [defaults]
        max_attempts = 9
        timeout_seconds = 60
        pass_score = 0.75
        gate = true
        env = { A = "1", B = "2" }
        plateau = { patience = 4, min_delta = 0.05, mode = "rel", min_attempts = 6 }

        [[pipelines.p.stages]]
        name = "inherits"
        verifier = ["judge"]

        [[pipelines.p.stages]]
        name = "overrides"
        worker = ["w"]
        gate = false
        max_attempts = 2
        timeout_seconds = 1.5
        pass_score = 1
        env = { B = "stage", C = "3" }
        """,
    )
    pipeline = load(path).pipeline("p")
    assert pipeline is not None
    inherits, overrides = pipeline.stages
    assert inherits.worker is None
    assert inherits.verifier == ("judge",)
    assert inherits.gate is True
    assert inherits.max_attempts == 9
    assert inherits.timeout_seconds == 60.0
    assert inherits.pass_score == 0.75
    assert inherits.env == (("A", "1"), ("B", "2"))
    assert inherits.plateau == PlateauPolicy(4, 0.05, "rel", 6)
    assert inherits.stdin == "none"
    assert inherits.prompt is None

    assert overrides.gate is False
    assert overrides.max_attempts == 2
    assert overrides.timeout_seconds == 1.5
    assert overrides.pass_score == 1.0
    # env merges name by name, the stage winning.
    assert dict(overrides.env) == {"A": "1", "B": "stage", "C": "3"}


def test_builtin_stage_defaults(tmp_path: Path) -> None:
    pipeline = load(write(tmp_path, MINIMAL_PIPELINE)).pipeline("default")
    assert pipeline is not None
    stage = pipeline.stages[0]
    assert stage.gate is False
    assert stage.max_attempts == 5
    assert stage.timeout_seconds == 1800.0
    assert stage.pass_score == 0.0
    assert stage.plateau == PlateauPolicy()
    assert stage.plateau.min_attempts is None
    assert stage.stdin == "none"
    assert stage.env == ()


def test_plateau_overrides_key_by_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [defaults.plateau]
        patience = 5
        min_delta = 0.2
        mode = "rel"

        [[pipelines.default.stages]]
        name = "a"
        worker = ["w"]
        plateau = { patience = 2 }

        [[pipelines.default.stages]]
        name = "b"
        worker = ["w"]
        plateau = { mode = "abs", min_attempts = 10 }

        [[pipelines.default.stages]]
        name = "c"
        worker = ["w"]
        """,
    )
    pipeline = load(path).pipeline("default")
    assert pipeline is not None
    a, b, c = pipeline.stages
    assert a.plateau == PlateauPolicy(patience=2, min_delta=0.2, mode="rel")
    assert a.plateau.effective_min_attempts == 3  # the stage's own patience + 1
    assert b.plateau == PlateauPolicy(patience=5, min_delta=0.2, mode="abs", min_attempts=10)
    assert c.plateau == PlateauPolicy(patience=5, min_delta=0.2, mode="rel")


def test_stage_plateau_over_builtin_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [[pipelines.default.stages]]
        name = "a"
        worker = ["w"]
        [pipelines.default.stages.plateau]
        min_delta = 0
        """,
    )
    pipeline = load(path).pipeline("default")
    assert pipeline is not None
    assert pipeline.stages[0].plateau == PlateauPolicy(patience=3, min_delta=0.0, mode="abs")


def test_setup_and_several_pipelines(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [pipelines.default]
        setup = ["git", "worktree", "add", "{workspace}"]

        [[pipelines.default.stages]]
        name = "research"
        worker = ["w"]

        [[pipelines.default.stages]]
        name = "implement"
        worker = ["w"]

        [[pipelines.quick.stages]]
        name = "do"
        verifier = ["v"]
        """,
    )
    settings = load(path)
    assert list(settings.pipelines) == ["default", "quick"]
    default = settings.pipeline("default")
    assert default is not None
    assert default.setup == ("git", "worktree", "add", "{workspace}")
    quick = settings.pipeline("quick")
    assert quick is not None
    assert quick.setup is None


def test_pipeline_navigation() -> None:
    def stage(name: str) -> StageConfig:
        return StageConfig(
            name=name,
            worker=("w",),
            verifier=None,
            gate=False,
            max_attempts=1,
            timeout_seconds=1.0,
            pass_score=0.0,
            plateau=PlateauPolicy(),
            prompt=None,
            stdin="none",
            env=(),
        )

    pipeline = PipelineConfig(
        name="p", stages=(stage("research"), stage("implement"), stage("review")), setup=None
    )
    assert pipeline.first_stage() == "research"
    assert pipeline.stage_names == ("research", "implement", "review")
    assert pipeline.stage("implement") == stage("implement")
    assert pipeline.stage("missing") is None


def test_settings_are_frozen(tmp_path: Path) -> None:
    settings = load(write(tmp_path, MINIMAL_PIPELINE))
    with pytest.raises(FrozenInstanceError):
        settings.lease_seconds = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        settings.pipelines["x"] = settings.pipelines["default"]  # type: ignore[index]


def test_prompt_file_may_be_missing(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [[pipelines.default.stages]]
        name = "a"
        worker = ["w"]
        prompt = "nowhere/prompt.md"
        """,
    )
    pipeline = load(path).pipeline("default")
    assert pipeline is not None
    assert pipeline.stages[0].prompt == tmp_path / "nowhere" / "prompt.md"


def test_stdin_prompt_from_defaults_with_prompt(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [defaults]
        stdin = "prompt"

        [[pipelines.default.stages]]
        name = "a"
        worker = ["w"]
        prompt = "p.md"
        """,
    )
    pipeline = load(path).pipeline("default")
    assert pipeline is not None
    assert pipeline.stages[0].stdin == "prompt"


def test_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / DEFAULT_CONFIG_NAME
    path.write_bytes(b"\xef\xbb\xbf" + MINIMAL_PIPELINE.encode())
    assert load(path).pipeline("default") is not None


# --------------------------------------------------------------------------
# Database URL precedence and resolution


def test_database_precedence(tmp_path: Path) -> None:
    cfg_dir = tmp_path / "cfg"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    path = write(cfg_dir, '[orchestrator]\ndatabase = "sqlite:///from-file.db"\n')
    env = {"ORCHESTRATOR_DB_URL": "sqlite:///from-env.db"}

    def url(**kwargs: object) -> str:
        return load(path, cwd=cwd, **kwargs).database_url

    assert url(db_url="sqlite:///from-cli.db", environ=env) == f"sqlite:///{cwd}/from-cli.db"
    assert url(environ=env) == f"sqlite:///{cwd}/from-env.db"
    assert url() == f"sqlite:///{cfg_dir}/from-file.db"
    # Empty values count as unset.
    assert (
        url(db_url="", environ={"ORCHESTRATOR_DB_URL": ""}) == f"sqlite:///{cfg_dir}/from-file.db"
    )

    bare = write(tmp_path / "bare", "")
    assert load(bare, cwd=cwd).database_url == f"sqlite:///{tmp_path}/bare/orchestrator.db"


def test_relative_sqlite_in_file_resolves_against_config_folder(tmp_path: Path) -> None:
    path = write(
        tmp_path / "conf", '[orchestrator]\ndatabase = "sqlite:///../data/o.db?timeout=5"\n'
    )
    settings = load(path, cwd=tmp_path / "elsewhere")
    assert settings.database_url == f"sqlite:///{tmp_path}/data/o.db?timeout=5"
    assert settings.database_url.startswith("sqlite:////")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///rel.db", "sqlite:////base/rel.db"),
        ("sqlite:///sub/../rel.db", "sqlite:////base/rel.db"),
        ("sqlite:///rel.db?mode=ro&uri=true", "sqlite:////base/rel.db?mode=ro&uri=true"),
        ("sqlite+pysqlite:///rel.db", "sqlite+pysqlite:////base/rel.db"),
        ("SQLite:///rel.db", "SQLite:////base/rel.db"),
        ("sqlite:////abs/x.db", "sqlite:////abs/x.db"),
        ("sqlite://", "sqlite://"),
        ("sqlite:///:memory:", "sqlite:///:memory:"),
        ("sqlite:///:memory:?cache=shared", "sqlite:///:memory:?cache=shared"),
        ("sqlite:///file:x.db?uri=true", "sqlite:///file:x.db?uri=true"),
        ("postgresql://u:p@h/db", "postgresql://u:p@h/db"),
        ("postgresql+psycopg:///db", "postgresql+psycopg:///db"),
        ("not a url", "not a url"),
    ],
)
def test_resolve_database_url(url: str, expected: str) -> None:
    assert resolve_database_url(url, Path("/base")) == expected


def test_resolve_database_url_encodes_the_folder() -> None:
    resolved = resolve_database_url("sqlite:///x.db?timeout=1", Path("/we?ird/10%"))
    assert resolved == "sqlite:////we%3Fird/10%25/x.db?timeout=1"


def test_resolved_url_round_trips_through_sqlalchemy(tmp_path: Path) -> None:
    from sqlalchemy.engine import make_url

    odd = tmp_path / "a?b%c d"
    url = make_url(resolve_database_url("sqlite:///x.db?timeout=3", odd))
    assert url.database == f"{odd}/x.db"
    assert dict(url.query) == {"timeout": "3"}


# --------------------------------------------------------------------------
# Finding the file


def test_find_config_order(tmp_path: Path) -> None:
    local = write(tmp_path, "")
    named = write(tmp_path / "a", "", name="named.toml")
    from_env = write(tmp_path / "b", "", name="env.toml")
    env = {"ORCHESTRATOR_CONFIG": str(from_env)}

    assert find_config(named, env, tmp_path) == named
    assert find_config("a/named.toml", env, tmp_path) == named  # relative to cwd
    assert find_config(None, env, tmp_path) == from_env
    assert find_config(None, {"ORCHESTRATOR_CONFIG": "b/env.toml"}, tmp_path) == from_env
    assert find_config(None, {}, tmp_path) == local
    assert find_config(None, {"ORCHESTRATOR_CONFIG": ""}, tmp_path) == local
    assert find_config(None, {}, tmp_path / "a") is None


def test_find_config_does_not_walk_up(tmp_path: Path) -> None:
    write(tmp_path, "")
    (tmp_path / "sub").mkdir()
    assert find_config(None, {}, tmp_path / "sub") is None


@pytest.mark.parametrize(
    ("explicit", "environ", "source"),
    [
        ("missing.toml", {}, "--config"),
        (None, {"ORCHESTRATOR_CONFIG": "missing.toml"}, "ORCHESTRATOR_CONFIG"),
    ],
)
def test_find_config_named_file_must_exist(
    tmp_path: Path, explicit: str | None, environ: dict[str, str], source: str
) -> None:
    write(tmp_path, "")  # a local file must not be used as a fallback
    with pytest.raises(ConfigError) as info:
        find_config(explicit, environ, tmp_path)
    assert "missing.toml" in str(info.value)
    assert source in str(info.value)


def test_load_settings_uses_environment_config(tmp_path: Path) -> None:
    path = write(tmp_path / "x", MINIMAL_PIPELINE, name="o.toml")
    settings = load_settings(environ={"ORCHESTRATOR_CONFIG": str(path)}, cwd=tmp_path)
    assert settings.config_path == path
    assert settings.base_dir == tmp_path / "x"


def test_load_settings_defaults_to_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, MINIMAL_PIPELINE)
    monkeypatch.setenv("ORCHESTRATOR_CONFIG", str(path))
    monkeypatch.delenv("ORCHESTRATOR_DB_URL", raising=False)
    monkeypatch.chdir(tmp_path / "..")
    assert load_settings().config_path == path


# --------------------------------------------------------------------------
# Fingerprint


def test_fingerprint_changes_with_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL_PIPELINE)
    first = load(path).fingerprint
    assert len(first) == 64
    assert first == config_fingerprint(path)
    assert load(path).fingerprint == first

    path.write_text(MINIMAL_PIPELINE + "\n# edited\n", encoding="utf-8")
    assert config_fingerprint(path) != first
    assert load(path).fingerprint == config_fingerprint(path)

    assert config_fingerprint(None) == ""
    path.unlink()
    assert config_fingerprint(path) == ""


# --------------------------------------------------------------------------
# Errors

STAGE = '[[pipelines.default.stages]]\nname = "s"\nworker = ["w"]\n'


def stage_with(extra: str, *, worker: bool = True) -> str:
    lines = ["[[pipelines.default.stages]]", 'name = "s"']
    if worker:
        lines.append('worker = ["w"]')
    return "\n".join([*lines, extra, ""])


BAD_CONFIGS: list[tuple[str, str, str]] = [
    # (toml, dotted key expected in the message, another fragment expected)
    ("[orchestrator\n", "invalid TOML", "line 1"),
    ("x = 1\n", "x", "allowed: orchestrator, defaults, pipelines"),
    ("[orchestrator]\nlease = 5\n", "orchestrator.lease", "did you mean 'lease_seconds'"),
    ("[defaults]\nworker = ['w']\n", "defaults.worker", "unknown key"),
    ("orchestrator = 3\n", "orchestrator", "expected a table"),
    ('[orchestrator]\ndatabase = ""\n', "orchestrator.database", "non-empty string"),
    ("[orchestrator]\ndatabase = 5\n", "orchestrator.database", "got 5"),
    ("[orchestrator]\nworkspace_root = 1\n", "orchestrator.workspace_root", "string"),
    ("[orchestrator]\nstate_root = ''\n", "orchestrator.state_root", "string"),
    ("[orchestrator]\nlock_file = []\n", "orchestrator.lock_file", "string"),
    ("[orchestrator]\nlease_seconds = 0\n", "orchestrator.lease_seconds", "> 0"),
    ("[orchestrator]\nlease_seconds = -1.5\n", "orchestrator.lease_seconds", "> 0"),
    ("[orchestrator]\nlease_seconds = true\n", "orchestrator.lease_seconds", "got true"),
    ("[orchestrator]\nlease_seconds = '900'\n", "orchestrator.lease_seconds", "'900'"),
    ("[orchestrator]\nlease_seconds = inf\n", "orchestrator.lease_seconds", "inf"),
    ("[orchestrator]\nretry_interval = -1\n", "orchestrator.retry_interval", ">= 0"),
    ("[orchestrator]\nretry_interval = nan\n", "orchestrator.retry_interval", "nan"),
    ("[orchestrator]\nmax_interrupts = 0\n", "orchestrator.max_interrupts", ">= 1"),
    ("[orchestrator]\nmax_interrupts = 2.0\n", "orchestrator.max_interrupts", "integer"),
    ("[orchestrator]\nmax_interrupts = false\n", "orchestrator.max_interrupts", "integer"),
    ("[orchestrator]\nenv_deny = 'X'\n", "orchestrator.env_deny", "list of strings"),
    ("[orchestrator]\nenv_deny = ['X', 1]\n", "orchestrator.env_deny[1]", "string"),
    ("[orchestrator]\naffinity = 'all'\n", "orchestrator.affinity", "'host' or 'any'"),
    ("[orchestrator]\nbusy_timeout = -1\n", "orchestrator.busy_timeout", ">= 0"),
    ("[orchestrator]\noutput_cap_bytes = 0\n", "orchestrator.output_cap_bytes", ">= 1"),
    ("[orchestrator]\noutput_cap_bytes = 1.5\n", "orchestrator.output_cap_bytes", "integer"),
    ("[orchestrator]\nkill_grace_seconds = -1\n", "orchestrator.kill_grace_seconds", ">= 0"),
    ("[defaults]\nmax_attempts = 0\n", "defaults.max_attempts", ">= 1"),
    ("[defaults]\ntimeout_seconds = 0\n", "defaults.timeout_seconds", "> 0"),
    ("[defaults]\npass_score = 1.5\n", "defaults.pass_score", "[0, 1]"),
    ("[defaults]\ngate = 'yes'\n", "defaults.gate", 'true, false or "auto"'),
    ("[defaults]\nstdin = 'file'\n", "defaults.stdin", "'none' or 'prompt'"),
    ("[defaults]\nenv = { A = 1 }\n", "defaults.env.A", "expected a string"),
    ("[defaults]\nenv = 'A=1'\n", "defaults.env", "table"),
    ("[defaults]\nplateau = 3\n", "defaults.plateau", "table"),
    ("[defaults]\nplateau = { patience = 0 }\n", "defaults.plateau.patience", ">= 1"),
    ("[defaults]\nplateau = { min_delta = -0.1 }\n", "defaults.plateau.min_delta", ">= 0"),
    ("[defaults]\nplateau = { mode = 'pct' }\n", "defaults.plateau.mode", "'abs' or 'rel'"),
    ("[defaults]\nplateau = { min_attempts = 0 }\n", "defaults.plateau.min_attempts", ">= 1"),
    ("[defaults]\nplateau = { wait = 1 }\n", "defaults.plateau.wait", "allowed: patience"),
    ("pipelines = 1\n", "pipelines", "table"),
    ("[pipelines.default]\n", "pipelines.default.stages", "at least one stage"),
    ("[pipelines.default]\nstages = []\n", "pipelines.default.stages", "at least one stage"),
    ("[pipelines.default]\nstages = 'a'\n", "pipelines.default.stages", "array of tables"),
    ("[pipelines.default]\nstages = ['a']\n", "pipelines.default.stages[0]", "table"),
    ("[pipelines.default]\ntasks = 1\n" + STAGE, "pipelines.default.tasks", "setup, stages"),
    (
        "[pipelines.Default]\n" + STAGE.replace("default", "Default"),
        "pipelines.Default",
        "invalid slug",
    ),
    ('[pipelines."a/b"]\n' + STAGE.replace("default", '"a/b"'), 'pipelines."a/b"', "slug"),
    ("[pipelines.default]\nsetup = 'git worktree add'\n" + STAGE, "setup", "argv list"),
    ("[pipelines.default]\nsetup = []\n" + STAGE, "pipelines.default.setup", "non-empty list"),
    ("[pipelines.default]\nsetup = ['git', 2]\n" + STAGE, "pipelines.default.setup[1]", "string"),
    (STAGE + STAGE, "pipelines.default.stages[1] (s).name", "duplicate stage name 's'"),
    (stage_with("timeout = 5"), "pipelines.default.stages[0] (s).timeout", "timeout_seconds"),
    ("[[pipelines.default.stages]]\nworker = ['w']\n", "stages[0].name", "missing"),
    ("[[pipelines.default.stages]]\nname = 3\nworker = ['w']\n", "stages[0].name", "got 3"),
    (STAGE.replace('"s"', '"Bad Name"'), "pipelines.default.stages[0].name", "invalid slug"),
    (STAGE.replace('"s"', '"../x"'), "pipelines.default.stages[0].name", "invalid slug"),
    (STAGE.replace('"s"', '"complete"'), "pipelines.default.stages[0].name", "reserved"),
    (stage_with("", worker=False), "pipelines.default.stages[0]", "needs a worker, a verifier"),
    (
        stage_with("worker = 'claude -p'", worker=False),
        "stages[0] (s).worker",
        '["sh", "-c", "..."]',
    ),
    (stage_with("verifier = 'pytest'"), "pipelines.default.stages[0] (s).verifier", "argv list"),
    (stage_with("verifier = []"), "pipelines.default.stages[0] (s).verifier", "non-empty list"),
    (stage_with("verifier = ['a', 1]"), "pipelines.default.stages[0] (s).verifier[1]", "got 1"),
    (stage_with("verifier = ['', 'x']"), "pipelines.default.stages[0] (s).verifier[0]", "empty"),
    (stage_with('verifier = ["a\\u0000b"]'), "pipelines.default.stages[0] (s).verifier[0]", "NUL"),
    (stage_with("stdin = 'pipe'"), "pipelines.default.stages[0] (s).stdin", "'none' or 'prompt'"),
    (stage_with("stdin = 'prompt'"), "pipelines.default.stages[0] (s).stdin", "needs a prompt"),
    (
        "[defaults]\nstdin = 'prompt'\n" + STAGE,
        "pipelines.default.stages[0] (s).stdin",
        "inherited from [defaults]",
    ),
    (stage_with("prompt = 3"), "pipelines.default.stages[0] (s).prompt", "string"),
    (stage_with("gate = 1"), "pipelines.default.stages[0] (s).gate", 'true, false or "auto"'),
    (
        stage_with("max_attempts = 'five'"),
        "pipelines.default.stages[0] (s).max_attempts",
        "expected an integer >= 1, got 'five'",
    ),
    (stage_with("max_attempts = true"), "pipelines.default.stages[0] (s).max_attempts", "got true"),
    (stage_with("max_attempts = 3.0"), "pipelines.default.stages[0] (s).max_attempts", "integer"),
    (stage_with("timeout_seconds = 0"), "pipelines.default.stages[0] (s).timeout_seconds", "> 0"),
    (stage_with("timeout_seconds = -5"), "pipelines.default.stages[0] (s).timeout_seconds", "> 0"),
    (stage_with("pass_score = -0.1"), "pipelines.default.stages[0] (s).pass_score", "[0, 1]"),
    (stage_with("pass_score = 2"), "pipelines.default.stages[0] (s).pass_score", "[0, 1]"),
    (stage_with("pass_score = false"), "pipelines.default.stages[0] (s).pass_score", "got false"),
    (stage_with("env = { A = true }"), "pipelines.default.stages[0] (s).env.A", "a string"),
    (stage_with('env = { "A=B" = "x" }'), 'pipelines.default.stages[0] (s).env."A=B"', "name"),
    (stage_with("plateau = { mode = 'x' }"), "stages[0] (s).plateau.mode", "'abs' or 'rel'"),
    (stage_with("plateau = { patience = 0 }"), "stages[0] (s).plateau.patience", ">= 1"),
    (stage_with("plateau = { min_delta = -1 }"), "stages[0] (s).plateau.min_delta", ">= 0"),
    (stage_with("plateau = { patience = '3' }"), "stages[0] (s).plateau.patience", "'3'"),
]


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    BAD_CONFIGS,
    ids=[f"{i}-{key}" for i, (_, key, _) in enumerate(BAD_CONFIGS)],
)
def test_invalid_config(tmp_path: Path, text: str, key: str, fragment: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert DEFAULT_CONFIG_NAME in message
    assert key in message
    assert fragment in message
    assert info.value.exit_code == 78


def test_example_message_shape(tmp_path: Path) -> None:
    path = write(
        tmp_path, STAGE + STAGE.replace('"s"', '"t"') + stage_with("").replace('"s"', '"u"')
    )
    path.write_text(path.read_text(encoding="utf-8") + "max_attempts = 'five'\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load(path)
    assert str(info.value) == (
        f"{path}: pipelines.default.stages[2] (u).max_attempts: "
        "expected an integer >= 1, got 'five'"
    )


def test_unknown_key_lists_allowed_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load(write(tmp_path, stage_with("wroker = ['x']")))
    message = str(info.value)
    assert "pipelines.default.stages[0] (s).wroker" in message
    assert "did you mean 'worker'" in message
    assert "allowed: name, gate, worker, verifier" in message


def test_toml_error_includes_position(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load(write(tmp_path, "[orchestrator]\nlease_seconds = 900\nlease_seconds = 1\n"))
    assert "line 3" in str(info.value)
    assert DEFAULT_CONFIG_NAME in str(info.value)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / DEFAULT_CONFIG_NAME
    path.write_bytes(b"x = '\xff'\n")
    with pytest.raises(ConfigError, match="UTF-8") as info:
        load(path)
    assert str(path) in str(info.value)


def test_permission_denied_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, MINIMAL_PIPELINE)

    def denied(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(ConfigError) as info:
        load(path)
    assert str(info.value) == f"{path}: cannot read the config file: Permission denied"
    assert info.value.exit_code == 78


def test_config_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "dir.toml").mkdir()
    with pytest.raises(ConfigError, match=r"dir\.toml: cannot read"):
        load_settings(config=tmp_path / "dir.toml", environ={}, cwd=tmp_path)


# --------------------------------------------------------------------------
# Import weight


def test_does_not_import_sqlalchemy_or_click() -> None:
    code = (
        "import orchestrator.config, sys; "
        "bad = [m for m in ('sqlalchemy', 'click', 'alembic') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run(
        [sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2]
    )


# -- runaway guards and strict verdicts (issue 15) ------------------------------


def _guard_config(tmp_path: Path, keys: str) -> Path:
    path = tmp_path / "orchestrator.toml"
    path.write_text(
        "[defaults]\nbackoff = { initial = 2, tries = 3 }\n\n"
        '[[pipelines.p.stages]]\nname = "s"\nworker = ["true"]\n' + keys
    )
    return path


def test_guard_keys_are_read_and_defaults_fold_in(tmp_path: Path) -> None:
    path = _guard_config(
        tmp_path,
        "strict_verdict = true\nhalt_after_no_change = 3\nretry_exit_codes = [75, 42]\n"
        "backoff = { factor = 3, max = 30 }\n",
    )
    stage = load_settings(config=path, environ={}).pipelines["p"].stages[0]
    assert stage.strict_verdict is True
    assert stage.halt_after_no_change == 3
    assert stage.retry_exit_codes == frozenset({75, 42})
    assert (stage.backoff.initial, stage.backoff.factor, stage.backoff.max) == (2.0, 3.0, 30.0)
    assert stage.backoff.tries == 3
    assert [stage.backoff.delay(n) for n in range(4)] == [2.0, 6.0, 18.0, 30.0]


def test_a_backoff_built_past_a_year_waits_a_year() -> None:
    """The config refuses such a wait; one built in code is clamped, so its
    end time can still be recorded."""
    huge = Backoff(initial=1e15, factor=1e300, max=1e300, tries=3)
    assert [huge.delay(n) for n in range(3)] == [MAX_BACKOFF] * 3
    assert MAX_BACKOFF == 365 * 24 * 3600


def test_guard_keys_default_off(tmp_path: Path) -> None:
    stage = load_settings(config=_guard_config(tmp_path, ""), environ={}).pipelines["p"].stages[0]
    assert stage.strict_verdict is False and stage.halt_after_no_change is None
    assert stage.retry_exit_codes == frozenset()


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ("retry_exit_codes = [0]", "retry_exit_codes: expected a list of exit statuses"),
        ('retry_exit_codes = "75"', "retry_exit_codes: expected a list of exit statuses"),
        ("halt_after_no_change = 0", "halt_after_no_change: expected an integer >= 1"),
        ("strict_verdict = 1", "strict_verdict: expected true or false"),
        ("backoff = { initial = 10, max = 5 }", "backoff: max (5) is less than initial (10)"),
        ("backoff = { tries = 0 }", "backoff.tries: expected an integer >= 1"),
        ("backoff = { factor = 0.5 }", "backoff.factor: expected a number >= 1"),
        ("backoff = { wait = 1 }", "backoff.wait: unknown key"),
        ("backoff = { max = 31536001 }", "backoff.max: 3.1536e+07 seconds is more than a year"),
        ("backoff = { initial = 1e15, max = 1e15 }", "backoff.initial: 1e+15 seconds is more"),
    ],
)
def test_guard_keys_are_validated(tmp_path: Path, keys: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(config=_guard_config(tmp_path, keys + "\n"), environ={})
    assert message in str(caught.value)
