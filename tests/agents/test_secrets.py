"""Secrets: a stage's `secrets` reach that stage's commands and nothing else
(other stages, `setup`, hooks), whether or not `env_deny` names them; and
`[orchestrator] env_file`, where a cron tick (an empty environment) finds
them. Real tick processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import Project, make_project

pytestmark = pytest.mark.e2e

# Prints the secret it sees as the verdict's reason, so the attempt records it.
ECHO = json.dumps(["sh", "-c", 'echo "{\\"pass\\": true, \\"reasons\\": [\\"[$TOKEN]\\"]}"'])


def two_stages(setup_dump: Path | None = None) -> str:
    setup = (
        ""
        if setup_dump is None
        else "[pipelines.default]\nsetup = "
        + json.dumps(["sh", "-c", f"echo \"[$TOKEN]\" > '{setup_dump}'; mkdir -p \"$1\"", "x",
                      "{workspace}"])
        + "\n"
    )
    return f"""
{setup}
[[pipelines.default.stages]]
name = "first"
worker = {ECHO}
secrets = ["TOKEN"]

[[pipelines.default.stages]]
name = "second"
worker = {ECHO}
"""


def seen(project: Project) -> list[tuple[str, str]]:
    return [
        (stage, json.loads(reasons)[0])
        for stage, reasons in project.query("SELECT stage, reasons FROM attempts ORDER BY id")
    ]


# Issue 22, item 10: without `env_deny` naming it, a stage's secret was
# inherited by every other stage, `setup` and every hook.
def test_a_secret_reaches_only_its_stage_without_env_deny(tmp_path: Path, db_url: str) -> None:
    setup_seen = tmp_path / "setup-env"
    hook_seen = tmp_path / "hook-env"
    project = make_project(tmp_path / "p", db_url, two_stages(setup_seen))
    project.config.write_text(
        project.config.read_text()
        + "\n[[hooks]]\nname = \"dump\"\non = [\"complete\"]\ncommand = "
        + json.dumps(["sh", "-c", f"cat > /dev/null; env > '{hook_seen}'"])
        + "\n"
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "t1", "--title", "Keys").returncode == 0
    done = project.run("tick", extra_env={"TOKEN": "s3cret"})
    assert done.returncode == 0, done.stderr
    assert seen(project) == [("first", "[s3cret]"), ("second", "[]")]
    assert setup_seen.read_text() == "[]\n"
    hook_env = hook_seen.read_text()
    assert "ORCHESTRATOR_EVENT_KIND=complete" in hook_env and "s3cret" not in hook_env
