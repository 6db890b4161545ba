"""`max_land_sendbacks` through real `tick` processes: a `land_check` that
cannot pass sends the task back that many times, then halts it
`land_failed` with the check's output; the tick's lines never say
`complete` before a landing succeeded, and a `resume` gives the allowance
again."""

from __future__ import annotations

import json

from e2e.e2e_support import PASS, stage
from support import Project, check_invariants, git, make_repo, write_config

# What `init --land merge` writes, run by a `python3` without pytest.
NO_PYTEST = ["sh", "-c", "echo '/usr/bin/python3: No module named pytest' >&2; exit 1"]


def configure(project: Project, extra: str = "") -> None:
    lines = ["[pipelines.default]", 'repository = "repo"', 'land = "merge"', extra]
    lines.append(f"land_check = {json.dumps(NO_PYTEST)}")
    worker = ["sh", "-c", 'echo "$ORCHESTRATOR_TASK" > "$ORCHESTRATOR_TASK.txt"']
    stages = stage("implement", worker=worker, verifier=PASS)
    stages += stage("review", worker=["true"], verifier=PASS)
    write_config(project.config, "\n".join(lines) + "\n\n" + stages)


def sendbacks(project: Project) -> int:
    rows = project.query("SELECT count(*) FROM transitions WHERE event = 'send_back'")
    return int(rows[0][0])


def test_a_check_that_cannot_pass_halts_land_failed_after_three_sendbacks(
    project: Project,
) -> None:
    repo = make_repo(project.dir)
    base = git(repo, "rev-parse", "main").strip()
    configure(project)
    assert project.run("add", "a", "--title", "Task a").returncode == 0
    said = []
    for number in range(1, 4):
        done = project.run("tick")
        assert done.returncode == 0, done.stderr
        said.append(done.stdout)
        assert project.state("a") == "implement" and sendbacks(project) == number
    done = project.run("tick")
    said.append(done.stdout)
    assert project.state("a") == "review:halted", done.stdout
    assert project.query("SELECT halt_reason FROM tasks") == [("land_failed",)]
    assert sendbacks(project) == 3
    log = "".join(said)
    assert "-> review:landing" in log and "sent it back to implement" in log
    assert "-> complete" not in log
    assert "halted (land_failed: land_check" in said[-1]
    explained = project.run("explain", "a")
    assert explained.returncode == 0
    assert "land_failed" in explained.stdout and "max_land_sendbacks" in explained.stdout
    assert "No module named pytest" in explained.stdout
    halt = json.loads(project.run("explain", "a", "--json").stdout)["halt"]
    assert halt["reason"] == "land_failed" and "No module named pytest" in halt["detail"]
    assert git(repo, "rev-parse", "main").strip() == base  # nothing landed
    assert check_invariants(project.db_url, allow_running=False) == []


def test_resume_gives_the_allowance_again_and_the_hint_to_the_stage(project: Project) -> None:
    make_repo(project.dir)
    configure(project, "max_land_sendbacks = 0")
    assert project.run("add", "a", "--title", "Task a").returncode == 0
    assert project.run("tick").returncode == 0
    assert project.state("a") == "review:halted" and sendbacks(project) == 0
    assert project.run("resume", "a").returncode == 0
    assert project.run("tick").returncode == 0
    given = project.query("SELECT stage, hint FROM attempts ORDER BY id")
    assert given[-1][0] == "review" and "No module named pytest" in given[-1][1]
    assert project.state("a") == "review:halted"  # 0: halted at the first failure again
    assert project.query("SELECT halt_reason FROM tasks") == [("land_failed",)]


def test_max_land_sendbacks_out_of_range_is_a_config_error(project: Project) -> None:
    make_repo(project.dir)
    configure(project, "max_land_sendbacks = -1")
    done = project.run("list")
    assert done.returncode == 78
    assert "max_land_sendbacks" in done.stderr
