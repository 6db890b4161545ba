"""A verifier's identity follows what would judge: its argv and the content
of the project files it names, not files outside the project."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.config import load_settings
from orchestrator.features.evidence.identity import verifier_identity


def identity_of(folder: Path, verifier: list[str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    config = folder / "orchestrator.toml"
    config.write_text(
        "[[pipelines.default.stages]]\n"
        'name = "review"\n'
        'worker = ["true"]\n'
        f"verifier = {json.dumps(verifier)}\n"
    )
    settings = load_settings(config=config, db_url="sqlite:///x.db", require_config=True)
    stage = settings.pipelines["default"].stage("review")
    assert stage is not None
    found = verifier_identity(stage, settings.base_dir)
    assert found is not None
    return found.id, found.scripts


def test_editing_a_named_script_changes_the_id(tmp_path: Path) -> None:
    script = tmp_path / "judge.py"
    script.write_text("print('{\"pass\": true}')\n")
    argv = ["python3", str(script), "--strict"]
    first, scripts = identity_of(tmp_path, argv)
    assert [name for name, _ in scripts] == ["judge.py"]
    assert identity_of(tmp_path, argv)[0] == first  # stable
    script.write_text("print('{\"pass\": false}')\n")
    assert identity_of(tmp_path, argv)[0] != first
    assert identity_of(tmp_path, [*argv[:2], "--lenient"])[0] != first


def test_files_outside_the_project_and_placeholders_are_argv_only(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.py"
    outside.write_text("x")
    project = tmp_path / "project"
    project.mkdir()
    _, scripts = identity_of(project, ["python3", str(outside), "{workspace}/judge.py"])
    assert scripts == ()
