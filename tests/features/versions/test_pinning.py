"""Pin by default, through real `orchestrator tick` processes and a real
config edit between them: a task waiting at a gate when its stage is
renamed and the next stage's verifier changed finishes on its own version
after `approve`, with the old verifier; a task added after the edit runs
the new one; `pipelines --json` lists both versions with their tasks."""

from __future__ import annotations

import json

from support import Project, cli_json


def _verifier(project: Project, mark: str) -> list[str]:
    """A verifier that says which version ran it, in a file of the project's."""
    ran = project.dir / "ran.txt"
    return ["sh", "-c", f'echo {mark} >> {ran}; echo \'{{"pass": true, "score": 1.0}}\'']


def _config(project: Project, *, gate: str, mark: str) -> None:
    passing = ["sh", "-c", 'echo \'{"pass": true, "score": 1.0}\'']
    stages = ""
    for name, verifier, extra in (
        ("build", passing, ""),
        (gate, passing, "gate = true\n"),
        ("test", _verifier(project, mark), ""),
    ):
        stages += (
            f'[[pipelines.default.stages]]\nname = "{name}"\nworker = ["true"]\n'
            f"verifier = {json.dumps(verifier)}\n{extra}\n"
        )
    project.write_config(stages)


def _tick_until(project: Project, slug: str, state: str) -> None:
    for _ in range(5):
        if project.state(slug) == state:
            return
        done = project.run("tick", timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    assert project.state(slug) == state


def _run(project: Project, *args: str) -> str:
    done = project.run(*args, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _ran(project: Project) -> list[str]:
    return (project.dir / "ran.txt").read_text(encoding="utf-8").splitlines()


def test_a_task_at_a_gate_finishes_on_its_own_version_after_the_stage_is_renamed(
    project: Project,
) -> None:
    _config(project, gate="review", mark="old")
    _run(project, "add", "early", "--title", "early")
    _tick_until(project, "early", "review:awaiting_approval")
    (old,) = [row[0] for row in project.query("SELECT hash FROM pipeline_versions")]

    _config(project, gate="check", mark="new")  # renamed, and a new verifier
    _run(project, "add", "late", "--title", "late")
    explained = cli_json(project.cli("explain", "early", "--json"))
    assert explained["version"]["version"] == old
    assert explained["version"]["older"] is True and explained["version"]["kept"] is True
    assert "its own version's stages" in project.cli("explain", "early").output

    listed = cli_json(project.cli("pipelines", "--json"))[0]
    new = listed["current"]
    stages = {v["version"]: v["stages"] for v in listed["versions"]}
    assert stages == {old: {"review": 1}, new: {"build": 1}}

    assert "approved" in _run(project, "approve", "early")
    _tick_until(project, "early", "complete")  # not halted as unknown_stage
    assert _ran(project) == ["old"]  # the old verifier, at its own version's next stage
    _tick_until(project, "late", "check:awaiting_approval")
    _run(project, "approve", "late")
    _tick_until(project, "late", "complete")
    assert _ran(project) == ["old", "new"]

    shown = cli_json(project.cli("show", "early", "--json"))
    assert {a["pipeline_version"] for a in shown["attempts"]} == {old}
    assert [a["stage"] for a in shown["attempts"]] == ["build", "review", "test"]
    late = cli_json(project.cli("show", "late", "--json"))
    assert {a["pipeline_version"] for a in late["attempts"]} == {new}
    listed = cli_json(project.cli("pipelines", "--json"))[0]
    assert {v["version"]: v["unfinished"] for v in listed["versions"]} == {old: 0, new: 0}


def test_a_host_without_the_tasks_version_never_runs_it(project: Project) -> None:
    """The database's copy of a definition is never run: with the host's
    kept files gone, the host holds no copy of the task's version, so it
    leaves the task (approved, not halted) and `explain` names the host
    that holds it."""
    _config(project, gate="review", mark="old")
    _run(project, "add", "early", "--title", "early")
    _tick_until(project, "early", "review:awaiting_approval")
    _config(project, gate="check", mark="new")
    for path in sorted((project.dir / "state" / ".pipeline-versions").glob("*.json")):
        path.unlink()
    _run(project, "approve", "early")
    for _ in range(2):
        done = project.run("tick", timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    assert project.state("early") == "review:approved"
    assert project.query("SELECT halt_reason FROM tasks")[0][0] is None
    assert not (project.dir / "ran.txt").exists()
    explained = cli_json(project.cli("explain", "early", "--json"))
    assert explained["version"]["kept"] is False
    [host] = [row[0] for row in project.query("SELECT DISTINCT host FROM pipeline_versions")]
    assert explained["version"]["hosts"] == [host]
    said = project.cli("explain", "early").output
    assert f"waits: not held on this host (held by {host})" in said


def test_a_tampered_kept_copy_is_refused_and_the_task_waits(project: Project) -> None:
    """A kept prompt changed on disk no longer hashes to the task's version:
    the tick leaves the task, says why, and `explain` says it too."""
    verdict = ["sh", "-c", 'echo \'{"pass": true, "score": 1.0}\'']
    prompt = project.dir / "build.md"
    prompt.write_text("Build it.\n", encoding="utf-8")
    stages = (
        f'[[pipelines.default.stages]]\nname = "build"\nworker = ["true"]\n'
        f"verifier = {json.dumps(verdict)}\ngate = true\n\n"
        f'[[pipelines.default.stages]]\nname = "test"\nworker = ["true"]\n'
        f'verifier = {json.dumps(verdict)}\nprompt = "build.md"\n'
    )
    project.write_config(stages)
    _run(project, "add", "early", "--title", "early")
    _tick_until(project, "early", "build:awaiting_approval")
    prompt.write_text("Build it better.\n", encoding="utf-8")  # a new version
    kept_prompts = project.dir / "state" / ".pipeline-versions" / "prompts"
    for path in kept_prompts.iterdir():
        if path.read_text(encoding="utf-8") == "Build it.\n":
            path.write_text("rm -rf everything\n", encoding="utf-8")
    _run(project, "approve", "early")
    done = project.run("tick", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "prompt of stage 'test' was changed" in done.stderr
    assert project.state("early") == "build:approved"
    explained = project.cli("explain", "early").output
    assert "waits: its kept copy on this host is refused" in explained


def test_an_attempt_runs_the_prompt_its_version_hashed(project: Project) -> None:
    """A prompt file edited after the tick loaded its version (here by the
    first stage's worker) is not what the next stage's attempt reads: it
    runs the prompt its recorded version hashed, from the host's kept copy."""
    verdict = ["sh", "-c", 'echo \'{"pass": true, "score": 1.0}\'']
    prompt = project.dir / "b.md"
    prompt.write_text("As hashed.\n", encoding="utf-8")
    edit = ["sh", "-c", f"echo 'Edited mid-tick.' > {prompt}"]
    project.write_config(
        f'[[pipelines.default.stages]]\nname = "a"\nworker = {json.dumps(edit)}\n'
        f"verifier = {json.dumps(verdict)}\n\n"
        f'[[pipelines.default.stages]]\nname = "b"\nworker = ["true"]\n'
        f'verifier = {json.dumps(verdict)}\nprompt = "b.md"\n'
    )
    _run(project, "add", "t1", "--title", "t1")
    _run(project, "tick")
    assert project.state("t1") == "complete"  # both stages in the tick that loaded it
    assert prompt.read_text(encoding="utf-8") == "Edited mid-tick.\n"
    [ran] = (project.dir / "state" / "t1").glob("b-001/prompt.md")
    assert ran.read_text(encoding="utf-8") == "As hashed.\n"
    versions = {row[0] for row in project.query("SELECT pipeline_version FROM attempts")}
    assert versions == {project.query("SELECT pipeline_version FROM tasks")[0][0]}


def test_gate_commands_check_the_stage_against_the_tasks_own_version(project: Project) -> None:
    """After a rename, `reject --to` chooses among the task's own version's
    stages (the config's new name is refused, naming the choices) and
    `approve` of its gate is accepted: the task runs its own version."""
    _config(project, gate="review", mark="old")
    _run(project, "add", "early", "--title", "early")
    _tick_until(project, "early", "review:awaiting_approval")
    _config(project, gate="check", mark="new")  # review renamed check
    done = project.run("reject", "early", "--to", "check", "--note", "x", timeout=120)
    assert done.returncode == 1
    assert "not an earlier stage of 'review'" in done.stderr and "build" in done.stderr
    assert "approved" in _run(project, "approve", "early")
    _tick_until(project, "early", "complete")
