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
from support import Project, copy_database, make_project

pytestmark = pytest.mark.e2e

# Prints the secret it sees as the verdict's reason, so the attempt records it.
ECHO = json.dumps(["sh", "-c", 'echo "{\\"pass\\": true, \\"reasons\\": [\\"[$TOKEN]\\"]}"'])


def two_stages(setup_dump: Path | None = None) -> str:
    setup = (
        ""
        if setup_dump is None
        else "[pipelines.default]\nsetup = "
        + json.dumps(
            ["sh", "-c", f'echo "[$TOKEN]" > \'{setup_dump}\'; mkdir -p "$1"', "x", "{workspace}"]
        )
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
def test_a_secret_reaches_only_its_stage_without_env_deny(
    tmp_path: Path, migrated_url: str
) -> None:
    setup_seen = tmp_path / "setup-env"
    hook_seen = tmp_path / "hook-env"
    project = make_project(tmp_path / "p", migrated_url, two_stages(setup_seen))
    project.config.write_text(
        project.config.read_text()
        + '\n[[hooks]]\nname = "dump"\non = ["complete"]\ncommand = '
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


def cron_run(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    """The way cron starts a tick: an empty environment but for PATH, the
    config and database given on the command line."""
    path = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    return subprocess.run(  # noqa: PLW1510 - callers assert on returncode
        [
            "env",
            "-i",
            f"PATH={path}",
            sys.executable,
            "-m",
            "orchestrator",
            "--config",
            str(project.config),
            "--db",
            project.db_url,
            *args,
        ],
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,
    )


def said(result: subprocess.CompletedProcess[str]) -> str:
    """Doctor's lines with their column padding collapsed."""
    return "\n".join(" ".join(line.split()) for line in result.stdout.splitlines())


def with_env_file(project: Project, body: str, mode: int = 0o600) -> Path:
    env_file = project.dir / "secrets.env"
    env_file.write_text(body)
    env_file.chmod(mode)
    project.config.write_text(
        project.config.read_text().replace(
            "[orchestrator]\n", '[orchestrator]\nenv_file = "secrets.env"\n', 1
        )
    )
    return env_file


# Issue 24: secrets that reach cron ticks.
def test_env_file_gives_a_cron_tick_its_secret_for_the_naming_stage_only(
    tmp_path: Path, migrated_url: str
) -> None:
    project = make_project(tmp_path / "p", migrated_url, two_stages())
    env_file = with_env_file(
        project, '# the project key\n\nexport TOKEN="from-file"\nUNUSED=never-passed\n'
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "t1", "--title", "Keys").returncode == 0
    assert "TOKEN" not in os.environ
    doctor = cron_run(project, "doctor")
    assert f"ok secrets default.first: TOKEN in {env_file}" in said(doctor), doctor.stdout

    done = cron_run(project, "tick")
    assert done.returncode == 0, done.stderr
    assert seen(project) == [("first", "[from-file]"), ("second", "[]")]

    # Group-readable: refused before anything runs, in one line without the key.
    env_file.chmod(0o640)
    assert project.run("add", "t2", "--title", "More").returncode == 0
    refused = cron_run(project, "tick")
    assert refused.returncode == 78, refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f"Error: env_file {env_file}: group or others may access it (mode 0640); "
        f"run `chmod 600 {env_file}`"
    ]
    assert len(seen(project)) == 2  # t2 never started
    doctor = cron_run(project, "doctor")
    assert doctor.returncode == 1 and "mode 0640" in doctor.stdout
    assert "from-file" not in refused.stderr + doctor.stdout


def test_doctor_fails_a_secret_set_nowhere_and_says_where_cron_looks(
    tmp_path: Path, migrated_url: str
) -> None:
    project = make_project(tmp_path / "p", migrated_url, two_stages())
    assert project.run("db", "upgrade").returncode == 0
    doctor = cron_run(project, "doctor")
    assert doctor.returncode == 1, doctor.stdout
    assert (
        "fail secrets default.first: TOKEN set in neither the environment nor env_file; "
        "a cron tick has none of this shell's environment: set [orchestrator] env_file"
    ) in said(doctor)
    # Exported in this shell only: fine now, not under cron.
    shell = project.run("doctor", extra_env={"TOKEN": "mine"})
    assert "warn secrets default.first: TOKEN only in this shell's environment" in said(shell)

    env_file = with_env_file(project, "OTHER=1\n")
    doctor = cron_run(project, "doctor")
    assert doctor.returncode == 1
    assert (
        "TOKEN set in neither the environment nor env_file; "
        f"a cron tick looks in env_file {env_file}"
    ) in doctor.stdout


@pytest.mark.parametrize(
    "line",
    [
        "TOKEN",
        "TO KEN=x",
        "1ABC=x",
        'TOKEN="unclosed',
        "TOKEN='a'b'",
        'TOKEN="a"b"',
        "ORCHESTRATOR_DB_URL=x",
        "export",
    ],
)
def test_an_env_file_line_that_is_not_name_value_is_refused_without_its_value(
    tmp_path: Path, line: str, template_db: Path
) -> None:
    project = make_project(
        tmp_path / "p", copy_database(template_db, tmp_path / "p" / "o.db"), two_stages()
    )
    env_file = with_env_file(project, f"# ok\nGOOD=1\n{line}-s3cret\n")
    assert project.run("db", "upgrade").returncode == 0
    refused = cron_run(project, "tick")
    assert refused.returncode == 78
    assert refused.stderr.startswith(f"Error: env_file {env_file}:3: not a NAME=value line")
    assert "s3cret" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


def test_dotenv_values_quotes_export_and_comments(tmp_path: Path) -> None:
    from orchestrator.config.envfile import parse_env_text

    text = (
        "# comment\n\n  export A=plain value  \nB='single # not a comment'\n"
        'C="double \\"q\\" \\n \\\\ $HOME"\nD=\nE=x=y\nA=last wins\n'
    )
    assert parse_env_text(tmp_path / "f", text) == {
        "A": "last wins",
        "B": "single # not a comment",
        "C": 'double "q" \n \\ $HOME',
        "D": "",
        "E": "x=y",
    }


@pytest.mark.parametrize("kind", ["link", "fifo", "missing"])
def test_an_env_file_that_is_not_a_regular_file_is_refused(
    tmp_path: Path, kind: str, template_db: Path
) -> None:
    project = make_project(
        tmp_path / "p", copy_database(template_db, tmp_path / "p" / "o.db"), two_stages()
    )
    env_file = with_env_file(project, "TOKEN=x\n")
    if kind == "link":
        real = tmp_path / "real.env"
        env_file.rename(real)
        env_file.symlink_to(real)
    elif kind == "fifo":
        env_file.unlink()
        os.mkfifo(env_file, 0o600)
    else:
        env_file.unlink()
    assert project.run("db", "upgrade").returncode == 0
    refused = cron_run(project, "tick")
    assert refused.returncode == 78, refused.stderr
    expected = {"link": "is a link", "fifo": "not a regular file", "missing": "not found"}[kind]
    assert refused.stderr.strip() == f"Error: env_file {env_file}: {expected}" + (
        "; name the file itself" if kind == "link" else ""
    )
