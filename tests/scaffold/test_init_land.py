"""`init --repository R --land merge`: the recipe it writes lands a task
(its land_check pointed at this Python, as its comment asks), and
`--land` without `--repository` is refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from e2e.e2e_support import PASS, stage
from support import Project, git, make_repo

from orchestrator.config import load_settings

STAND_IN = stage(
    "implement",
    worker=["sh", "-c", "printf 'def test_it():\\n    assert True\\n' > test_it.py"],
    verifier=PASS,
)


def run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "--config",
            str(folder / "orchestrator.toml"),
            *args,
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_init_land_merge_writes_a_recipe_that_lands(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    folder = tmp_path / "tasks-project"
    folder.mkdir()
    done = run(folder, "init", "--repository", str(repo), "--land", "merge")
    assert done.returncode == 0, done.stderr
    config = folder / "orchestrator.toml"
    settings = load_settings(config=config, db_url=None)
    pipeline = settings.pipeline("default")
    assert pipeline is not None
    assert pipeline.landing.mode == "merge" and pipeline.landing.to == "implement"
    assert pipeline.landing.check == ("python3", "-m", "pytest", "-q", "-x")
    # The agents' stages swapped for a stand-in; the landing keys as written,
    # the check on this interpreter (the one with pytest).
    head = config.read_text().split("[[pipelines.default.stages]]")[0]
    head = head.replace('["python3", "-m", "pytest"', f'["{sys.executable}", "-m", "pytest"')
    config.write_text(head + "\n" + STAND_IN)
    project = Project(dir=folder, db_url=settings.database_url, config=config)
    assert run(folder, "add", "t", "--title", "A test").returncode == 0
    ticked = run(folder, "tick")
    assert ticked.returncode == 0, ticked.stderr
    assert project.state("t") == "complete"
    assert "test_it.py" in git(repo, "ls-tree", "--name-only", "main")


def test_init_land_needs_a_repository(tmp_path: Path) -> None:
    done = run(tmp_path, "init", "--land", "merge")
    assert done.returncode == 1
    assert "--repository" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "orchestrator.toml").exists()
