"""The built wheel works without the source tree: demo, init, add, tick, list.

Builds the wheel from this checkout, installs it (not editable) into a fresh
virtual environment, and runs the console script from an empty folder
outside the repository, so nothing can be imported from the checkout. The
migrations must come from inside the installed package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def clean_env() -> dict[str, str]:
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    return {
        k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_") and k not in drop
    }


def run(
    argv: list[str], cwd: Path, timeout: float = 300, **extra: str
) -> subprocess.CompletedProcess[str]:
    env = {**clean_env(), **extra}
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, (argv, done.stdout[-3000:], done.stderr[-3000:])
    return done


@pytest.mark.slow
def test_wheel_installs_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)], ROOT)
    (wheel,) = dist.glob("orchestrator-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in (
        "orchestrator/migrations/env.py",
        "orchestrator/migrations/versions/0001_initial.py",
        "orchestrator/templates/init/orchestrator.toml",
        "orchestrator/templates/init/judges/pytest_judge.py",
        "orchestrator/templates/demo/prompts/demo.md",
        "orchestrator/scaffold/demo_agent.py",
        "orchestrator/py.typed",
    ):
        assert expected in names, expected

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    python = venv / "bin" / "python"
    run([str(python), "-m", "pip", "install", "-q", str(wheel)], tmp_path, timeout=600)
    program = str(venv / "bin" / "orchestrator")

    where = run(
        [str(python), "-c", "import orchestrator.storage.migrate as m; print(m.migrations_dir())"],
        tmp_path,
    ).stdout.strip()
    migrations = Path(where)
    assert "site-packages" in migrations.parts
    assert migrations.parts[-2:] == ("orchestrator", "migrations")
    assert (migrations / "env.py").is_file()
    assert not migrations.is_relative_to(ROOT)

    # the demo, from the installed package
    demo = run([program, "demo", "--dir", "demo"], tmp_path, timeout=120)
    assert "implement:halted (score_plateau)" in demo.stdout
    assert "Demo finished in" in demo.stdout

    # a fresh project: init, add, tick, list --json. PATH holds no agent: the
    # tick stops on the configured program it cannot start (78), no attempt
    # spent, and the task stays ready at its stage.
    project = tmp_path / "project"
    project.mkdir()
    run([program, "init"], project)
    assert (project / "orchestrator.toml").is_file() and (project / "orchestrator.db").is_file()
    run([program, "add", "first", "--title", "The first task"], project)
    ticked = subprocess.run(
        [program, "tick"],
        cwd=project,
        env={**clean_env(), "PATH": str(venv / "bin")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ticked.returncode == 78, (ticked.stdout[-3000:], ticked.stderr[-3000:])
    assert "no attempt spent" in ticked.stdout + ticked.stderr
    rows = json.loads(run([program, "list", "--json"], project).stdout)
    assert [(r["slug"], r["stage"], r["status"]) for r in rows] == [("first", "research", "ready")]
