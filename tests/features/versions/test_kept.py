"""A host keeps each version it loads on its own disk, and rebuilds the
same pipeline from those files alone: every key of every stage comes back,
the prompt from its kept bytes, whatever the config says now."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from orchestrator.config import PipelineConfig, load_settings
from orchestrator.features.versions import kept
from orchestrator.features.versions.definition import loaded_version, read_prompts

# Most keys a stage or a pipeline has, set away from their defaults.
CONFIG = """
[pipelines.default]
setup = ["make", "deps"]
repository = "repo"
base = "main"
land = "merge"
land_check = ["make", "check"]
keep_worktree_days = 3.5
sandbox_network = false

[[pipelines.default.stages]]
name = "build"
worker = ["make", "build"]
verifier = ["python3", "judge.py"]
prompt = "prompts/build.md"
stdin = "prompt"
max_attempts = 7
timeout_seconds = 120
pass_score = 0.8
worker_ok_exit = [0, 1]
retry_exit_codes = [75]
env = {{ LEVEL = "2" }}
strict_verdict = true
halt_after_no_change = 2
sandbox_ro = ["~/.cache"]
plateau = {{ patience = 4, min_delta = 0.05 }}

[[pipelines.default.stages]]
name = "review"
worker = ["true"]
gate = true
"""


def _pipeline(folder: Path) -> PipelineConfig:
    (folder / "prompts").mkdir(parents=True, exist_ok=True)
    (folder / "prompts" / "build.md").write_text("Build {slug}.\n", encoding="utf-8")
    path = folder / "orchestrator.toml"
    path.write_text(CONFIG.format(), encoding="utf-8")
    return load_settings(config=path).pipelines["default"]


def test_a_kept_version_rebuilds_the_same_pipeline(tmp_path: Path) -> None:
    pipeline = _pipeline(tmp_path / "project")
    version = loaded_version(pipeline)
    state = tmp_path / "state"
    kept.keep(state, version, pipeline, read_prompts(pipeline))
    loaded = kept.load(state, version.hash)
    assert loaded is not None
    rebuilt = kept.with_extras(loaded, pipeline)  # the features' extension values: today's
    prompt = rebuilt.stages[0].prompt
    assert prompt is not None and prompt.parent == state / kept.FOLDER / "prompts"
    assert prompt.read_text(encoding="utf-8") == "Build {slug}.\n"
    # Every other key as the config made it.
    same = dataclasses.replace(
        rebuilt,
        stages=(
            dataclasses.replace(rebuilt.stages[0], prompt=pipeline.stages[0].prompt),
            *rebuilt.stages[1:],
        ),
    )
    assert same == pipeline
    assert loaded_version(rebuilt).hash == version.hash  # the same version, from the kept files


def test_the_kept_copy_outlives_the_configs_edits(tmp_path: Path) -> None:
    project = tmp_path / "project"
    pipeline = _pipeline(project)
    version = loaded_version(pipeline)
    state = tmp_path / "state"
    kept.keep(state, version, pipeline, read_prompts(pipeline))
    (project / "prompts" / "build.md").write_text("Something else.\n", encoding="utf-8")
    (project / "orchestrator.toml").write_text("", encoding="utf-8")
    rebuilt = kept.load(state, version.hash)
    assert rebuilt is not None and rebuilt.stage_names == ("build", "review")
    assert rebuilt.stages[0].prompt is not None
    assert rebuilt.stages[0].prompt.read_text(encoding="utf-8") == "Build {slug}.\n"


def test_a_version_not_kept_or_unreadable_is_none(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert kept.load(state, "0" * 64) is None
    assert kept.load(state, "../../etc/passwd") is None  # not a hash: never a path
    pipeline = _pipeline(tmp_path / "project")
    version = loaded_version(pipeline)
    kept.keep(state, version, pipeline, read_prompts(pipeline))
    path = state / kept.FOLDER / f"{version.hash}.json"
    path.write_text("not json", encoding="utf-8")
    assert kept.load(state, version.hash) is None


def test_a_kept_copy_that_does_not_hash_to_its_version_is_refused(tmp_path: Path) -> None:
    """A changed definition, prompt or env value in the host's kept copy is
    never run: `Tampered`, not the changed pipeline, and not None (a copy
    that is simply absent)."""
    pipeline = _pipeline(tmp_path / "project")
    version = loaded_version(pipeline)
    state = tmp_path / "state"
    root = state / kept.FOLDER
    kept.keep(state, version, pipeline, read_prompts(pipeline))
    path = root / f"{version.hash}.json"
    clean = path.read_bytes()

    local = json.loads(clean)
    local["definition"]["stages"][0]["worker"] = ["sh", "-c", "evil"]
    path.write_text(json.dumps(local), encoding="utf-8")
    with pytest.raises(kept.Tampered, match="definition"):
        kept.load(state, version.hash)

    local = json.loads(clean)
    local["env"]["build"] = [["LEVEL", "3"]]
    path.write_text(json.dumps(local), encoding="utf-8")
    with pytest.raises(kept.Tampered, match="env of stage 'build'"):
        kept.load(state, version.hash)

    path.write_bytes(clean)
    [prompt] = (root / "prompts").iterdir()
    prompt.write_text("Do something else.\n", encoding="utf-8")
    with pytest.raises(kept.Tampered, match="prompt of stage 'build' was changed"):
        kept.load(state, version.hash)
    prompt.unlink()
    with pytest.raises(kept.Tampered, match="prompt of stage 'build' is gone"):
        kept.load(state, version.hash)
