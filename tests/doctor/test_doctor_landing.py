"""`doctor` runs each `land_check`'s interpreter as the landing would (its
PATH, its environment): a `python3 -m pytest` whose python3 has no pytest
fails doctor (exit 1), before cron sends a task back for it."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from e2e.e2e_support import PASS, stage
from support import Project, git, make_repo, write_config


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


def pr_landing(project: Project, remote_url: str | None, extra: str = "") -> None:
    repo = make_repo(project.dir)
    if remote_url is not None:
        git(repo, "remote", "add", "origin", remote_url)
    head = f'[pipelines.default]\nrepository = "repo"\nland = "pr"\n{extra}\n'
    write_config(project.config, head + stage("implement", worker=["true"], verifier=PASS))


def fake_gh(folder: Path) -> dict[str, str]:
    """A `gh` whose `auth status` passes only with GH_TOKEN set, as a token login does."""
    folder.mkdir()
    gh = folder / "gh"
    gh.write_text(
        '#!/bin/sh\n[ -n "$GH_TOKEN" ] && exit 0\n'
        'echo "You are not logged into any GitHub hosts." >&2; exit 1\n'
    )
    gh.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}


def pr_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.split()[1:2] == ["land_pr"]]


def test_pr_landing_without_a_login_or_remote_fails(project: Project, tmp_path: Path) -> None:
    pr_landing(project, None)
    done = project.run("doctor", extra_env=fake_gh(tmp_path / "bin"))
    assert done.returncode == 1
    lines = pr_lines(done.stdout)
    assert any(line.startswith("fail") and "not logged in" in line for line in lines), lines
    assert any("no remote 'origin'" in line for line in lines), lines


def test_pr_landing_with_its_token_from_env_file_passes(project: Project, tmp_path: Path) -> None:
    secrets = project.dir / "tick.env"
    project.dir.mkdir(parents=True, exist_ok=True)
    secrets.write_text("GH_TOKEN=t0ken\n")
    secrets.chmod(0o600)
    pr_landing(project, "https://github.com/o/r.git", 'land_secrets = ["GH_TOKEN"]')
    text = project.config.read_text().replace(
        "[orchestrator]\n", '[orchestrator]\nenv_file = "tick.env"\n', 1
    )
    project.config.write_text(text)
    done = project.run("doctor", extra_env=fake_gh(tmp_path / "bin"))
    lines = pr_lines(done.stdout)
    assert [line.split()[0] for line in lines] == ["ok", "ok"], done.stdout
    assert "remote origin https://github.com/o/r.git" in lines[1]


def test_pr_landing_without_gh_fails(project: Project, tmp_path: Path) -> None:
    pr_landing(project, "https://github.com/o/r.git")
    only_git = tmp_path / "only-git"  # gh may sit beside git in /usr/bin
    only_git.mkdir()
    (only_git / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    done = project.run("doctor", extra_env={"PATH": str(only_git)})
    assert any("gh is not on the landing's PATH" in line for line in pr_lines(done.stdout))
