"""`doctor` tries bubblewrap for real when a stage asks for it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import Project, make_project

from orchestrator.runner.sandbox import bwrap_program
from orchestrator.storage import migrate
from orchestrator.storage.db import make_engine

STAGE = """
[[pipelines.default.stages]]
name = "implement"
worker = ["true"]
verifier = ["sh", "-c", "echo '{{\\"pass\\": true}}'"]
sandbox = "{mode}"
"""


@pytest.fixture
def sqlite_project(tmp_path: Path) -> Project:
    url = f"sqlite:///{tmp_path / 'proj' / 'orchestrator.db'}"
    (tmp_path / "proj").mkdir()
    engine = make_engine(url, create=True)
    migrate.upgrade(engine)
    engine.dispose()
    return make_project(tmp_path / "proj", url, STAGE.format(mode="bwrap"))


def sandbox_lines(project: Project) -> tuple[int, list[str]]:
    result = project.cli("doctor")
    return result.exit_code, [line for line in result.stdout.splitlines() if " sandbox " in line]


def test_bubblewrap_runs_here(sqlite_project: Project) -> None:
    if bwrap_program() is None and not os.environ.get("CI"):
        pytest.skip("bubblewrap (bwrap) is not installed")
    code, out = sandbox_lines(sqlite_project)
    assert code == 0
    assert out == [out[0]] and out[0].startswith("ok ") and "default.implement" in out[0]


def test_no_check_without_a_sandboxed_stage(sqlite_project: Project) -> None:
    sqlite_project.write_config(STAGE.format(mode="none"))
    assert sandbox_lines(sqlite_project) == (0, [])


def test_missing_bubblewrap_says_how_to_install_it(sqlite_project: Project, tmp_path: Path) -> None:
    sqlite_project.env["PATH"] = str(tmp_path / "empty")
    code, out = sandbox_lines(sqlite_project)
    assert code == 1
    assert out[0].startswith("fail") and "apt-get install bubblewrap" in out[0]


def test_bubblewrap_that_cannot_make_namespaces_says_what_to_do(
    sqlite_project: Project, tmp_path: Path
) -> None:
    """A host forbidding user namespaces cannot be made here (we are root):
    a stand-in `bwrap` prints what the real one prints there, and fails."""
    folder = tmp_path / "bin"
    folder.mkdir()
    fake = folder / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the"
        " kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    sqlite_project.env["PATH"] = f"{folder}{os.pathsep}{os.environ['PATH']}"
    code, out = sandbox_lines(sqlite_project)
    assert code == 1
    assert "No permissions to creating new namespace" in out[0]
    assert "unprivileged_userns_clone" in out[0] and 'sandbox = "none"' in out[0]
