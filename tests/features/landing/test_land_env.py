"""One route for what a cron tick needs, through real `tick` processes whose
environment has none of it (XT_REPO stands for GH_REPO,
XT_TOKEN for GH_TOKEN): `[orchestrator] env` names variables from
`env_file` that every stage and the landing get; `land_secrets` hands the
landing a secret a stage also lists (which keeps it from everything else)."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.e2e_support import PASS, stage
from support import Project, make_repo, write_config


def dumping(path: Path) -> list[str]:
    """argv that writes what it sees of the two variables to `path`."""
    script = f'echo "$0 XT_REPO=${{XT_REPO-unset}} XT_TOKEN=${{XT_TOKEN-unset}}" >> "{path}"'
    return ["sh", "-c", script]


def test_env_and_land_secrets_reach_the_stages_and_the_landing_from_env_file(
    project: Project, tmp_path: Path
) -> None:
    make_repo(project.dir)
    seen = tmp_path / "seen.txt"
    env_file = project.dir / "tick.env"
    env_file.write_text("XT_REPO=me/app\nXT_TOKEN=t0ken\n")
    env_file.chmod(0o600)
    check = dumping(seen)
    check[2] = check[2].replace("$0", "check")
    pipeline = (
        '[pipelines.default]\nrepository = "repo"\nland = "merge"\n'
        f'land_check = {json.dumps(check)}\nland_secrets = ["XT_TOKEN"]\n\n'
    )
    implement = dumping(seen)
    implement[2] = implement[2].replace("$0", "implement") + " && touch done.txt"
    review = dumping(seen)
    review[2] = review[2].replace("$0", "review")
    stages = stage("implement", worker=implement, verifier=PASS, secrets=["XT_TOKEN"])
    stages += stage("review", worker=review, verifier=PASS)
    write_config(project.config, pipeline + stages, env_file="tick.env", env=["XT_REPO"])
    assert project.run("add", "a", "--title", "A").returncode == 0
    done = project.run("tick")  # its environment has neither: only the file does
    assert done.returncode == 0, done.stdout + done.stderr
    assert project.state("a") == "complete", done.stdout
    lines = seen.read_text().splitlines()
    assert "implement XT_REPO=me/app XT_TOKEN=t0ken" in lines  # its secret, and env
    assert "review XT_REPO=me/app XT_TOKEN=unset" in lines  # env only: not its secret
    assert "check XT_REPO=me/app XT_TOKEN=t0ken" in lines  # land_secrets


def test_a_bad_name_in_env_is_a_config_error(project: Project) -> None:
    project.write_config(stage("s", worker=["true"], verifier=PASS), env=["XT-REPO"])
    done = project.run("list")
    assert done.returncode == 78 and "orchestrator.env[0]" in done.stderr
