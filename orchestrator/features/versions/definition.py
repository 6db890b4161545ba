"""What a pipeline version is: the content hash of everything that decides
what its stages do, computed from the loaded config and the prompt files'
bytes, handed in (this module reads no file).

Two configs that run the same commands with the same prompts are one
version, however the TOML is laid out or wherever a prompt file lives: the
hash is over a canonical JSON `definition`, in which a prompt is its
content's digest, not its path. Paths that only say where this host keeps
things (the repository's folder) are left out, so two hosts with the same
config in different folders agree on the version
(`docs/decisions/pipeline-versions.md`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator import safefs
from orchestrator.config import PipelineConfig, StageConfig

# Bumped when what goes into a definition changes meaning, so that an old
# and a new orchestrator never read one hash two ways.
FORMAT = 1
SHORT = 12  # the hex digits a version is shown by
MISSING = "missing"  # a prompt file that could not be read
_WHOLE = 1 << 62  # a prompt is hashed whole, however long: never cut short

# What a pipeline carries that is where, not what: the repository's folder
# on this host. `base` (the branch) stays: it is what a task starts from.
_PIPELINE_SKIP = frozenset({"name", "stages", "repository"})
_POLICY = "versions"  # this feature's own extension Section

Prompts = Mapping[Path, bytes | None]
"""A prompt file's bytes by its path as the config names it (None: unreadable)."""

JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]


@dataclass(frozen=True, slots=True)
class PipelineVersion:
    """One pipeline's version: its hash (hex sha-256) and the definition it
    is the hash of, kept for display and diffs."""

    pipeline: str
    hash: str
    definition: dict[str, JsonValue]

    @property
    def short(self) -> str:
        return self.hash[:SHORT]

    def as_json(self) -> str:
        return canonical(self.definition)


def pipeline_version(pipeline: PipelineConfig, prompts: Prompts) -> PipelineVersion:
    """The version of `pipeline` whose prompt files hold `prompts`."""
    found = definition(pipeline, prompts)
    digest = hashlib.sha256(canonical(found).encode("utf-8")).hexdigest()
    return PipelineVersion(pipeline.name, digest, found)


def definition(pipeline: PipelineConfig, prompts: Prompts) -> dict[str, JsonValue]:
    """The canonical, JSON-ready form of what `pipeline` does: its stages in
    order, each with every key that shapes an attempt, the prompt as its
    content's digest; and the pipeline's own keys (setup, land, sandbox...)."""
    own = {
        f.name: _plain(getattr(pipeline, f.name))
        for f in dataclasses.fields(pipeline)
        if f.name not in _PIPELINE_SKIP
    }
    # `on_change` says what an edit does to tasks in flight, not what a
    # stage does: switching it makes no new version.
    own["extras"] = {k: _plain(v) for k, v in pipeline.extras.items() if k != _POLICY}
    stages: list[JsonValue] = [_stage(stage, prompts) for stage in pipeline.stages]
    return {"format": FORMAT, "pipeline": pipeline.name, "stages": stages, **own}


def _stage(stage: StageConfig, prompts: Prompts) -> dict[str, JsonValue]:
    found = {f.name: _plain(getattr(stage, f.name)) for f in dataclasses.fields(stage)}
    found["prompt"] = None if stage.prompt is None else prompt_digest(prompts.get(stage.prompt))
    # A value may be a secret, and the definition is shown and stored in the
    # database: the version changes with it, the text never leaves the host.
    found["env"] = [[name, value_digest(value)] for name, value in stage.env]
    return found


def prompt_digest(content: bytes | None) -> str:
    """A prompt as a definition holds it: its content's sha-256, or `missing`."""
    return MISSING if content is None else "sha256:" + hashlib.sha256(content).hexdigest()


def value_digest(value: str) -> str:
    """An env value as a definition holds it: its sha-256, never its text."""
    return "sha256:" + hashlib.sha256(value.encode("utf-8")).hexdigest()


def canonical(value: JsonValue) -> str:
    """One spelling per value: keys sorted, no spaces, non-finite floats as text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _plain(value: object) -> JsonValue:
    """A config value as JSON: dataclasses as objects, sets sorted, tuples
    as lists, floats that JSON cannot spell as text."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, frozenset | set):
        return sorted((_plain(item) for item in value), key=canonical)
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"a pipeline definition cannot hold {type(value).__name__}")


def read_prompts(pipeline: PipelineConfig) -> dict[Path, bytes | None]:
    """The bytes of each prompt file `pipeline` names, whole, as the attempt
    would read them now (None: unreadable, or not a regular file: a FIFO
    planted in its place must not hang a tick). The one read of a file here,
    kept out of `pipeline_version` so that stays a function of its arguments."""
    found: dict[Path, bytes | None] = {}
    for stage in pipeline.stages:
        if stage.prompt is None or stage.prompt in found:
            continue
        try:
            found[stage.prompt] = safefs.read_bytes(stage.prompt, _WHOLE)
        except OSError:
            found[stage.prompt] = None
    return found


def loaded_version(pipeline: PipelineConfig) -> PipelineVersion:
    """The version of `pipeline` as its prompt files stand on this disk."""
    return pipeline_version(pipeline, read_prompts(pipeline))
