"""`doctor` runs each `land_check`'s interpreter as the landing would (its
PATH, its environment): a `python3 -m pytest` whose python3 has no pytest
fails doctor (exit 1), before cron sends a task back for it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from e2e.e2e_support import PASS, stage
from support import Project, make_repo, write_config


def landing(project: Project, check: list[str]) -> None:
    make_repo(project.dir)
    head = '[pipelines.default]\nrepository = "repo"\nland = "merge"\n'
    head += f"land_check = {json.dumps(check)}\n\n"
    write_config(project.config, head + stage("implement", worker=["true"], verifier=PASS))


def python3_on(folder: Path, *flags: str) -> dict[str, str]:
    """A `python3` first on PATH: this interpreter, `-S` (no site: no pytest) when asked."""
    folder.mkdir()
    shim = folder / "python3"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} {" ".join(flags)} "$@"\n')
    shim.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}


def said(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.split()[1:2] == ["land_check"]]


def test_a_python_without_pytest_fails_doctor(project: Project, tmp_path: Path) -> None:
    landing(project, ["python3", "-m", "pytest", "-q", "-x"])
    done = project.run("doctor", extra_env=python3_on(tmp_path / "bin", "-S"))
    assert done.returncode == 1, done.stdout
    [line] = said(done.stdout)
    assert line.startswith("fail") and "pytest does not import" in line
    assert str(tmp_path / "bin" / "python3") in line and "No module named" in line


def test_a_python_with_pytest_passes(project: Project, tmp_path: Path) -> None:
    landing(project, ["python3", "-m", "pytest", "-q", "-x"])
    done = project.run("doctor", extra_env=python3_on(tmp_path / "bin"))
    [line] = said(done.stdout)
    assert line.startswith("ok") and "pytest imports in" in line, done.stdout


def test_a_check_program_not_on_path_fails(project: Project) -> None:
    landing(project, ["no-such-checker-xyz", "--all"])
    done = project.run("doctor")
    assert done.returncode == 1
    [line] = said(done.stdout)
    assert line.startswith("fail") and "'no-such-checker-xyz' not found on PATH" in line


@pytest.mark.parametrize("check", [["sh", "-c", "exit 1"], [sys.executable, "-c", "pass"]])
def test_a_check_that_starts_is_ok_and_is_not_run(
    project: Project, tmp_path: Path, check: list[str]
) -> None:
    # doctor starts the interpreter alone, never the check (it runs the tests).
    landing(project, check)
    done = project.run("doctor")
    [line] = said(done.stdout)
    assert line.startswith("ok"), done.stdout


def test_no_landing_no_land_check_line(project: Project) -> None:
    done = project.run("doctor")
    assert said(done.stdout) == []
