"""`[orchestrator] env` hands its names to every stage, `setup` and landing,
past `env_deny`; so a name that `env_deny` denies, or that a stage keeps as
its `secrets` or the landing as its `land_secrets`, must not be in it, or
every stage would see the secret. Through real `orchestrator` processes."""

from __future__ import annotations

import pytest
from e2e.e2e_support import PASS, stage
from support import Project

DENY = ["*_TOKEN", "AWS_*"]


def test_a_name_env_deny_denies_is_refused_in_env(project: Project) -> None:
    project.write_config(
        stage("s", worker=["true"], verifier=PASS), env=["GH_REPO", "GH_TOKEN"], env_deny=DENY
    )
    done = project.run("list")
    assert done.returncode == 78, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "orchestrator.env[1]" in line and "'GH_TOKEN'" in line and "env_deny" in line


def test_a_stage_secret_is_refused_in_env(project: Project) -> None:
    stages = stage("a", worker=["true"], verifier=PASS, secrets=["DEPLOY_KEY"])
    stages += stage("b", worker=["true"], verifier=PASS)
    project.write_config(stages, env=["DEPLOY_KEY"], env_deny=DENY)
    done = project.run("list")
    assert done.returncode == 78, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "orchestrator.env[0]" in line and "'DEPLOY_KEY'" in line and "secrets" in line


def test_a_land_secret_is_refused_in_env(project: Project) -> None:
    pipeline = '[pipelines.default]\nland_secrets = ["PUSH_KEY"]\n\n'
    project.write_config(pipeline + stage("s", worker=["true"], verifier=PASS), env=["PUSH_KEY"])
    done = project.run("list")
    assert done.returncode == 78, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "orchestrator.env[0]" in line and "'PUSH_KEY'" in line and "land_secrets" in line


@pytest.mark.parametrize("env", [["GH_REPO"], ["GH_REPO", "ANTHROPIC_BASE_URL"]])
def test_names_no_route_keeps_secret_are_accepted(project: Project, env: list[str]) -> None:
    stages = stage("a", worker=["true"], verifier=PASS, secrets=["DEPLOY_KEY"])
    project.write_config(stages, env=env, env_deny=DENY)
    done = project.run("list")
    assert done.returncode == 0, done.stdout + done.stderr
