"""`on_change = "upgrade"`, through real `orchestrator tick` processes and
real config edits between them: a compatible change (a verifier's) reaches
a task in flight at its next stage; a breaking one (its stage renamed)
holds the task, neither run on the new config nor halted, and says so."""

from __future__ import annotations

import json

from support import Project, cli_json

PASS = ["sh", "-c", 'echo \'{"pass": true, "score": 1.0}\'']


def _marking(project: Project, mark: str) -> list[str]:
    ran = project.dir / "ran.txt"
    return ["sh", "-c", f'echo {mark} >> {ran}; echo \'{{"pass": true, "score": 1.0}}\'']


def _config(project: Project, *, gate: str, mark: str, on_change: str = "upgrade") -> None:
    stages = f'[pipelines.default]\non_change = "{on_change}"\n\n'
    for name, verifier, extra in (
        (gate, PASS, "gate = true\n"),
        ("test", _marking(project, mark), ""),
    ):
        stages += (
            f'[[pipelines.default.stages]]\nname = "{name}"\nworker = ["true"]\n'
            f"verifier = {json.dumps(verifier)}\n{extra}\n"
        )
    project.write_config(stages)


def _run(project: Project, *args: str) -> str:
    done = project.run(*args, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _versions(project: Project) -> dict[str, str]:
    return {
        str(stage): str(version)
        for stage, version in project.query("SELECT stage, pipeline_version FROM attempts")
    }


def test_a_compatible_change_reaches_a_task_in_flight_at_its_next_stage(project: Project) -> None:
    _config(project, gate="review", mark="old")
    _run(project, "add", "t1", "--title", "t1")
    _run(project, "tick")
    assert project.state("t1") == "review:awaiting_approval"
    [(old,)] = project.query("SELECT pipeline_version FROM tasks")

    _config(project, gate="review", mark="new")  # the next stage's verifier changed
    said = project.cli("explain", "t1").output
    assert "moves to the current version at its next claim" in said
    _run(project, "approve", "t1")
    _run(project, "tick")
    assert project.state("t1") == "complete"
    assert (project.dir / "ran.txt").read_text(encoding="utf-8").splitlines() == ["new"]
    [(now,)] = project.query("SELECT pipeline_version FROM tasks")
    assert now != old
    assert _versions(project) == {"review": old, "test": now}
    shown = cli_json(project.cli("show", "t1", "--json"))
    assert shown["pipeline_version"] == now


def test_a_breaking_change_holds_the_task_and_names_the_migrate_command(project: Project) -> None:
    _config(project, gate="review", mark="old")
    _run(project, "add", "t1", "--title", "t1")
    _run(project, "tick")
    _config(project, gate="check", mark="new")  # its stage renamed: no place in the new one
    _run(project, "approve", "t1")
    for _ in range(2):
        said = _run(project, "tick")
        assert project.state("t1") == "review:approved"  # held: not run, not halted
    assert "stage 'review' has no place" in said
    assert "orchestrator migrate t1 --to current --map review=STAGE" in said
    assert project.query("SELECT halt_reason FROM tasks") == [(None,)]
    assert not (project.dir / "ran.txt").exists()
    explained = project.cli("explain", "t1").output
    assert "held until `orchestrator migrate t1 --to current --map review=STAGE`" in explained


def test_pin_keeps_the_old_verifier_for_the_same_edit(project: Project) -> None:
    """The default, for contrast: the same compatible edit does not reach it."""
    _config(project, gate="review", mark="old", on_change="pin")
    _run(project, "add", "t1", "--title", "t1")
    _run(project, "tick")
    _config(project, gate="review", mark="new", on_change="pin")
    _run(project, "approve", "t1")
    _run(project, "tick")
    assert project.state("t1") == "complete"
    assert (project.dir / "ran.txt").read_text(encoding="utf-8").splitlines() == ["old"]
