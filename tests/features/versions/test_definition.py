"""A pipeline version is a content hash: what a stage does changes it, how
the config is written or where a prompt file lives does not."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.config import PipelineConfig, load_settings
from orchestrator.features.versions.definition import (
    MISSING,
    loaded_version,
    pipeline_version,
    read_prompts,
)

CONFIG = """
[pipelines.default]

[[pipelines.default.stages]]
name = "build"
worker = ["make", "build"]
verifier = ["python3", "judge.py"]
prompt = "{prompt}"
stdin = "prompt"

[[pipelines.default.stages]]
name = "review"
worker = ["true"]
gate = true
"""

# The same config, written another way: keys in another order, other
# spacing, arrays over lines, a comment, no pipeline header.
REFORMATTED = """
# the same pipeline
[[pipelines.default.stages]]
stdin="prompt"
prompt   =   "{prompt}"
verifier = [ "python3",
             "judge.py" ]
worker=["make","build"]
name = "build"

[[pipelines.default.stages]]
gate = true
name = "review"
worker = [ "true" ]
"""


def _pipeline(folder: Path, text: str, prompt: str = "prompts/build.md") -> PipelineConfig:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "orchestrator.toml"
    path.write_text(text.format(prompt=prompt), encoding="utf-8")
    return load_settings(config=path).pipelines["default"]


def _with_prompt(folder: Path, content: str, where: str = "prompts/build.md") -> Path:
    prompt = folder / where
    prompt.parent.mkdir(parents=True, exist_ok=True)
    prompt.write_text(content, encoding="utf-8")
    return folder


def _hash(folder: Path, text: str = CONFIG, where: str = "prompts/build.md") -> str:
    return loaded_version(_pipeline(folder, text, where)).hash


def test_the_same_config_is_the_same_version(tmp_path: Path) -> None:
    _with_prompt(tmp_path, "Build {slug}.\n")
    assert _hash(tmp_path) == _hash(tmp_path)
    assert len(_hash(tmp_path)) == 64


def test_reformatting_the_toml_keeps_the_version(tmp_path: Path) -> None:
    _with_prompt(tmp_path, "Build {slug}.\n")
    assert _hash(tmp_path, REFORMATTED) == _hash(tmp_path, CONFIG)


def test_moving_a_prompt_file_with_the_same_content_keeps_the_version(tmp_path: Path) -> None:
    here = _with_prompt(tmp_path / "a", "Build {slug}.\n")
    there = _with_prompt(tmp_path / "b", "Build {slug}.\n", "elsewhere/deep/p.txt")
    assert _hash(here) == _hash(there, where="elsewhere/deep/p.txt")


def test_changing_a_prompt_files_content_changes_the_version(tmp_path: Path) -> None:
    before = _hash(_with_prompt(tmp_path, "Build {slug}.\n"))
    after = _hash(_with_prompt(tmp_path, "Build {slug}, carefully.\n"))
    assert before != after


def test_renaming_a_stage_changes_the_version(tmp_path: Path) -> None:
    _with_prompt(tmp_path, "Build {slug}.\n")
    renamed = CONFIG.replace('name = "review"', 'name = "check"')
    assert _hash(tmp_path, renamed) != _hash(tmp_path)


def test_changing_a_verifier_argv_changes_the_version(tmp_path: Path) -> None:
    _with_prompt(tmp_path, "Build {slug}.\n")
    changed = CONFIG.replace('"judge.py"]', '"judge.py", "--strict"]')
    assert _hash(tmp_path, changed) != _hash(tmp_path)


def test_each_deciding_key_changes_the_version(tmp_path: Path) -> None:
    _with_prompt(tmp_path, "Build {slug}.\n")
    base = _hash(tmp_path)
    edits = [
        CONFIG.replace('["make", "build"]', '["make", "all"]'),  # worker argv
        CONFIG.replace("gate = true", "gate = false"),  # a gate
        CONFIG.replace('stdin = "prompt"', 'stdin = "prompt"\nmax_attempts = 9'),  # a limit
        CONFIG.replace('stdin = "prompt"', 'stdin = "prompt"\nsandbox = "bwrap"'),  # sandbox
        CONFIG.replace('stdin = "prompt"\n', "").replace('prompt = "{prompt}"\n', ""),  # stdin
        CONFIG + '\n[[pipelines.default.stages]]\nname = "more"\nworker = ["true"]\n',
    ]
    hashes = {_hash(tmp_path, edit) for edit in edits}
    assert base not in hashes and len(hashes) == len(edits)


def test_the_stage_order_is_part_of_the_version(tmp_path: Path) -> None:
    _with_prompt(tmp_path, "Build {slug}.\n")
    build, review = CONFIG.split("\n[[pipelines.default.stages]]\n")[1:]
    swapped = "[pipelines.default]\n\n[[pipelines.default.stages]]\n" + review
    swapped += "\n[[pipelines.default.stages]]\n" + build
    assert _hash(tmp_path, swapped) != _hash(tmp_path)


def test_the_definition_holds_the_prompts_digest_not_its_path_nor_text(tmp_path: Path) -> None:
    _with_prompt(tmp_path, "A secret-ish prompt text.\n")
    version = loaded_version(_pipeline(tmp_path, CONFIG))
    shown = version.as_json()
    assert "build.md" not in shown and "secret-ish" not in shown
    assert str(tmp_path) not in shown  # no path of this host
    stages = json.loads(shown)["stages"]
    assert [s["name"] for s in stages] == ["build", "review"]
    assert stages[0]["prompt"].startswith("sha256:") and stages[1]["prompt"] is None


def test_a_version_is_a_function_of_the_prompts_handed_in(tmp_path: Path) -> None:
    pipeline = _pipeline(tmp_path, CONFIG)  # the prompt file does not exist
    assert read_prompts(pipeline) == {tmp_path / "prompts/build.md": None}
    missing = pipeline_version(pipeline, {})
    assert missing.definition["stages"][0]["prompt"] == MISSING  # type: ignore[index,call-overload]
    given = pipeline_version(pipeline, {tmp_path / "prompts/build.md": b"Build.\n"})
    assert given.hash != missing.hash
    assert given == pipeline_version(pipeline, {tmp_path / "prompts/build.md": b"Build.\n"})


def test_a_fifo_in_place_of_a_prompt_does_not_hang_the_read(tmp_path: Path) -> None:
    """A tick computes versions before its first claim: a FIFO nobody
    writes, planted where a prompt file was, must read as unreadable at
    once, not block the tick on its open."""
    import os
    import threading

    folder = tmp_path / "project"
    pipeline = _pipeline(folder, CONFIG)
    (folder / "prompts").mkdir(parents=True)
    os.mkfifo(folder / "prompts" / "build.md")
    found: list[dict[Path, bytes | None]] = []
    reader = threading.Thread(target=lambda: found.append(read_prompts(pipeline)), daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive(), "reading the prompts blocked on a FIFO"
    assert list(found[0].values()) == [None]
    assert pipeline_version(pipeline, found[0]).definition["stages"][0]["prompt"] == MISSING  # type: ignore[index,call-overload]


def test_a_long_prompt_is_hashed_whole(tmp_path: Path) -> None:
    """Two prompts that differ only past the first 16 MiB are two versions."""
    head = "x" * ((16 << 20) + 1024)
    first = _hash(_with_prompt(tmp_path / "a", head + "first\n"))
    second = _hash(_with_prompt(tmp_path / "b", head + "second\n"))
    assert first != second


ENV_CONFIG = """
[[pipelines.default.stages]]
name = "build"
worker = ["true"]
env = {{ TOKEN = "{token}" }}
"""


def test_env_values_enter_the_version_as_digests_never_as_text(tmp_path: Path) -> None:
    """The definition is stored in the database and shown by `pipelines`:
    a stage's env value changes the version but never appears in it."""
    one = loaded_version(_pipeline(tmp_path / "a", ENV_CONFIG.replace("{token}", "s3cret-one")))
    two = loaded_version(_pipeline(tmp_path / "b", ENV_CONFIG.replace("{token}", "s3cret-two")))
    assert one.hash != two.hash
    assert "s3cret" not in one.as_json() and "s3cret" not in two.as_json()
    [[name, value]] = one.definition["stages"][0]["env"]  # type: ignore[index,call-overload,misc]
    assert name == "TOKEN" and str(value).startswith("sha256:")
