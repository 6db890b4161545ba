"""The versions a host keeps on its own disk, so that a task runs the
version it was added on after the config changed (pin by default).

Each version this host loads is kept in its state folder, under
`.pipeline-versions/` (no task's folder: a slug starts with a letter or a
digit): `<hash>.json`, the definition with what only this host needs to run
it (the repository's folder), and each prompt's bytes under
`prompts/<sha256>`, named by content. A task on an older version runs the
pipeline `rebuild` makes from those files.

What a host runs comes from files it wrote itself from a config it read
from its own disk; the database's copy of a definition (display only) is
never read here. A host that never loaded a task's version keeps no copy
of it, and runs the task on its config as it is
(`docs/decisions/pipeline-versions.md`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator import safefs
from orchestrator.config import PipelineConfig, StageConfig
from orchestrator.config.model import sandbox_config
from orchestrator.domain.backoff import Backoff
from orchestrator.domain.plateau import PlateauPolicy
from orchestrator.features.versions.definition import (
    MISSING,
    PipelineVersion,
    Prompts,
    canonical,
    prompt_digest,
    value_digest,
)

FOLDER = ".pipeline-versions"
# Landing's settings as a pipeline that does not land holds them: replaced
# field by field, so this feature names no other feature's class.
_NO_LANDING = PipelineConfig(name="", stages=(), setup=None).landing
_LIMIT = 64 << 20  # a kept definition's bytes, read back at most
_WHOLE = 1 << 62  # a kept prompt is read whole to check its hash


def folder(state_root: Path) -> Path:
    return state_root / FOLDER


def keep(
    state_root: Path, version: PipelineVersion, pipeline: PipelineConfig, prompts: Prompts
) -> None:
    """Write `version`'s files unless kept already (a version never changes:
    its name is its content's hash). OSError when the state folder refuses."""
    root = folder(state_root)
    path = root / f"{version.hash}.json"
    if path.exists():
        return
    (root / "prompts").mkdir(parents=True, exist_ok=True)
    for content in prompts.values():
        if content is not None:
            named = root / "prompts" / hashlib.sha256(content).hexdigest()
            if not named.exists():
                safefs.replace(named, content)
    local = {
        "definition": version.definition,
        "repository": None if pipeline.repository is None else str(pipeline.repository),
        # The definition holds env values as digests; the host keeps their
        # text beside it, as its config file does.
        "env": {stage.name: [list(pair) for pair in stage.env] for stage in pipeline.stages},
    }
    safefs.replace(path, json.dumps(local, sort_keys=True).encode("utf-8"))


class Tampered(Exception):
    """A kept copy that no longer matches the hash it is named by: never
    run (someone or something changed the host's files since it kept them)."""


def load(state_root: Path, version: str) -> PipelineConfig | None:
    """The pipeline of `version` as this host kept it; None when it kept no
    copy (or one it cannot read: it is then as good as none). `Tampered`
    when the copy is there but its definition, a prompt or an env value
    does not hash to what the version says."""
    if len(version) != 64 or not all(c in "0123456789abcdef" for c in version):
        return None
    root = folder(state_root)
    try:
        local = json.loads(safefs.read_bytes(root / f"{version}.json", _LIMIT))
        definition = local["definition"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        _check(definition, version, root / "prompts", local.get("env", {}))
        return rebuild(definition, local.get("repository"), root / "prompts", local.get("env"))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise Tampered(f"its kept copy cannot be read back ({exc})") from exc


def _check(definition: Any, version: str, prompts: Path, env: Any) -> None:
    """`Tampered` unless the kept files are what `version` hashes."""
    if hashlib.sha256(canonical(definition).encode("utf-8")).hexdigest() != version:
        raise Tampered("its kept definition does not match its hash")
    for stage in definition["stages"]:
        digest = stage["prompt"]
        if digest is not None and digest != MISSING:
            try:
                content = safefs.read_bytes(prompts / digest.removeprefix("sha256:"), _WHOLE)
            except OSError as exc:
                raise Tampered(f"the kept prompt of stage {stage['name']!r} is gone") from exc
            if prompt_digest(content) != digest:
                raise Tampered(f"the kept prompt of stage {stage['name']!r} was changed")
        values = env.get(stage["name"], []) if isinstance(env, dict) else []
        if [[str(k), value_digest(str(v))] for k, v in values] != stage["env"]:
            raise Tampered(f"the kept env of stage {stage['name']!r} was changed")


def rebuild(
    definition: Mapping[str, Any],
    repository: str | None,
    prompts: Path,
    env: Mapping[str, Any] | None = None,
) -> PipelineConfig:
    """The `PipelineConfig` a definition was made from, its prompts read
    from `prompts` (by content), its env values from `env` (by stage) and
    its repository this host's `repository`."""
    # A feature's extension values are in the definition as JSON, not as
    # the objects its Section builds: the caller puts today's back (`with_extras`).
    own = {
        k: v for k, v in definition.items() if k not in ("format", "pipeline", "stages", "extras")
    }
    values = env or {}
    return PipelineConfig(
        name=str(definition["pipeline"]),
        stages=tuple(
            _stage(stage, prompts, values.get(stage["name"], ())) for stage in definition["stages"]
        ),
        **{
            **_plain_fields(own),
            "setup": _argv(own.get("setup")),
            "landing": dataclasses.replace(
                _NO_LANDING,
                **{
                    **_tuples(own["landing"]),
                    "check": _argv(own["landing"]["check"]),
                    "timeout": _number(own["landing"]["timeout"]),
                },
            ),
            "sandbox": sandbox_config(**_tuples(own["sandbox"])),
            "keep_worktree_days": _number(own.get("keep_worktree_days")),
        },
        repository=None if repository is None else Path(repository),
    )


def _stage(stage: Mapping[str, Any], prompts: Path, env: Any) -> StageConfig:
    digest = stage["prompt"]
    prompt = None
    if digest is not None:
        prompt = prompts / (MISSING if digest == MISSING else digest.removeprefix("sha256:"))
    return StageConfig(
        **{
            **_plain_fields({k: v for k, v in stage.items() if k != "extras"}),
            "worker": _argv(stage["worker"]),
            "verifier": _argv(stage["verifier"]),
            "prompt": prompt,
            "plateau": PlateauPolicy(**stage["plateau"]),
            "backoff": Backoff(**{k: _number(v) for k, v in stage["backoff"].items()}),
            "sandbox": sandbox_config(**_tuples(stage["sandbox"])),
            "env": tuple((str(k), str(v)) for k, v in env),
            "worker_ok_exit": frozenset(stage["worker_ok_exit"]),
            "retry_exit_codes": frozenset(stage["retry_exit_codes"]),
            "timeout_seconds": _number(stage["timeout_seconds"]),
            "pending_timeout": _number(stage["pending_timeout"]),
            "max_cost_usd": _number(stage["max_cost_usd"]),
        }
    )


def with_extras(rebuilt: PipelineConfig, configured: PipelineConfig | None) -> PipelineConfig:
    """`rebuilt` with the features' extension values of the configured
    pipeline of its name (by stage name for a stage's): what a kept copy
    cannot rebuild, taken from the config as it is (empty without one)."""
    if configured is None:
        return rebuilt
    stages = tuple(
        dataclasses.replace(stage, extras=now.extras)
        if (now := configured.stage(stage.name)) is not None
        else stage
        for stage in rebuilt.stages
    )
    return dataclasses.replace(rebuilt, stages=stages, extras=configured.extras)


def _plain_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """A definition's values as the config holds them: lists as tuples."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}


def _argv(value: Any) -> tuple[str, ...] | None:
    return None if value is None else tuple(str(part) for part in value)


def _tuples(value: Mapping[str, Any]) -> dict[str, Any]:
    """JSON's lists back to the tuples the frozen configs hold."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in value.items()}


def _number(value: Any) -> Any:
    """A float the definition spelt as text (`inf`) back as a float."""
    return float(value) if isinstance(value, str) else value
