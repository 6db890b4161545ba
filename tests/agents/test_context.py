"""context.json and the prompt placeholders built from it (issue 15),
through real ticks (`python -m orchestrator tick`) and real worker processes."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.e2e_support import PASS, stage
from support import Project

FAIL_THEN_PASS = (
    'if [ {attempt} = 1 ]; then echo \'{"pass": false, "score": 0.3, '
    '"reasons": ["r1", "r2"], "next_hint": "fix it"}\'; '
    'else echo \'{"pass": true, "score": 0.9, "reasons": ["ok"]}\'; fi'
)
# Keeps what it was given in the workspace: the context file (by argv and by
# environment) and the rendered prompt.
KEEP = (
    "cp {context_file} ctx-{stage}-{attempt}.json && "
    'printf %s "$ORCHESTRATOR_CONTEXT_FILE" > env-{stage}-{attempt}.txt && '
    "cp {prompt_file} prompt-{stage}-{attempt}.md"
)
PROMPT = (
    "reasons:\n{reasons}\nhistory:\n{history}\nfile: {context_file}\nsession: [{prev_session}]\n"
)


def stages(prompt: Path, *, gate: bool) -> str:
    return stage(
        "research",
        gate=gate,
        max_attempts=4,
        prompt=str(prompt),
        worker=["sh", "-c", KEEP],
        verifier=["sh", "-c", FAIL_THEN_PASS],
    ) + stage("implement", prompt=str(prompt), worker=["sh", "-c", KEEP], verifier=PASS)


def setup(project: Project, *, gate: bool) -> Path:
    prompt = project.dir / "prompt.md"
    prompt.write_text(PROMPT)
    project.write_config(stages(prompt, gate=gate))
    assert project.cli("add", "t1", "--title", "Task one", "--body", "do it").exit_code == 0
    return project.dir / "tasks" / "t1"


def load(workspace: Path, stage: str, attempt: int) -> dict:  # type: ignore[type-arg]
    return json.loads((workspace / f"ctx-{stage}-{attempt}.json").read_text())


def test_context_after_a_failed_verdict(project: Project) -> None:
    workspace = setup(project, gate=False)
    done = project.run("tick")
    assert done.returncode == 0, done.stderr
    assert project.state("t1") == "complete"

    first = load(workspace, "research", 1)
    assert first["version"] == 1
    assert first["task"] == {
        "slug": "t1",
        "title": "Task one",
        "body": "do it",
        "pipeline": "default",
        "priority": 0,
    }
    assert first["stage"]["name"] == "research" and first["stage"]["max_attempts"] == 4
    assert first["attempt"]["number"] == 1 and first["attempt"]["run"] == 1
    assert first["attempt"]["attempts_left"] == 4
    assert first["attempt"]["hint"] == "" and first["attempt"]["prev_session"] is None
    assert first["history"] == [] and first["notes"] == [] and first["earlier_stages"] == {}
    assert first["plateau"]["scores"] == [] and first["plateau"]["patience"] == 3

    second = load(workspace, "research", 2)
    assert second["attempt"]["number"] == 2
    assert second["attempt"]["attempts_left"] == 3
    assert second["attempt"]["hint"] == "fix it"
    [earlier] = second["history"]
    assert earlier["number"] == 1
    assert earlier["outcome"] == "failed"
    assert earlier["score"] == 0.3
    assert earlier["pass"] is False
    assert earlier["reasons"] == ["r1", "r2"]
    assert earlier["next_hint"] == "fix it"
    assert earlier["error"] is None
    assert second["plateau"]["scores"] == [0.3]
    # The same file by argv and by environment, in the attempt's state folder.
    path = (workspace / "env-research-2.txt").read_text()
    assert path.endswith("t1/research-002/context.json") and Path(path).is_file()

    prompt = (workspace / "prompt-research-2.md").read_text()
    assert "reasons:\n- r1\n- r2\n" in prompt
    assert "1 | failed | 0.30 | no | fix it" in prompt
    assert f"file: {path}\n" in prompt and "session: []" in prompt
    assert "reasons:\n\nhistory:\n\n" in (workspace / "prompt-research-1.md").read_text()

    # The next stage sees the last passing verdict of the earlier one.
    later = load(workspace, "implement", 1)
    assert later["earlier_stages"] == {
        "research": {"attempt": 2, "run": 1, "score": 0.9, "reasons": ["ok"], "next_hint": ""}
    }
    assert later["history"] == []


def test_context_after_a_rejection(project: Project) -> None:
    workspace = setup(project, gate=True)
    assert project.run("tick").returncode == 0
    assert project.state("t1") == "research:awaiting_approval"
    rejected = project.cli("reject", "t1", "--note", "cite two sources", "--by", "alice")
    assert rejected.exit_code == 0, rejected.output
    assert project.run("tick").returncode == 0
    assert project.state("t1") == "research:awaiting_approval"

    third = load(workspace, "research", 3)
    assert third["attempt"]["hint"] == "cite two sources"
    [note] = third["notes"]
    assert note["event"] == "reject"
    assert note["note"] == "cite two sources"
    assert note["by"] == "alice"
    assert note["from"] == "research:awaiting_approval"
    assert note["at"]
    # A rejection starts a new run: its history is its own.
    assert third["attempt"]["run"] == 2 and third["history"] == []
    assert third["attempt"]["attempts_left"] == 4
    prompt = (workspace / "prompt-research-3.md").read_text()
    assert "reasons:\n\nhistory:\n\n" in prompt

    assert project.cli("approve", "t1", "--note", "good now", "--by", "bob").exit_code == 0
    assert project.run("tick").returncode == 0
    later = load(workspace, "implement", 1)
    assert [n["event"] for n in later["notes"]] == ["reject", "approve"]
    assert later["notes"][1]["note"] == "good now" and later["notes"][1]["by"] == "bob"
    assert later["earlier_stages"]["research"]["attempt"] == 3


# review finding: {reasons} and {prev_session} are taken from the attempt just
# before (history[-1], number - 1) whatever it was; an attempt that "counts
# toward nothing" (a backoff: rate limited) in between wipes them, so the
# attempt after a rate limit is told no reasons and cannot resume the session.
def test_a_backoff_between_attempts_keeps_reasons_and_session(project: Project) -> None:
    prompt = project.dir / "prompt.md"
    prompt.write_text(PROMPT)
    worker = (
        "case {attempt} in 2) exit 75;; esac; cp {prompt_file} prompt-{attempt}.md; "
        'printf \'{"session_id": "sess-{attempt}"}\' > "$ORCHESTRATOR_USAGE_FILE"; '
        'echo \'{"pass": false, "score": 0.{attempt}, "reasons": ["r{attempt}"]}\''
    )
    project.write_config(
        stage(
            "work",
            max_attempts=2,
            prompt=str(prompt),
            worker=["sh", "-c", worker],
            retry_exit_codes=[75],
            backoff={"initial": 0, "factor": 1, "max": 0, "tries": 3},
        )
    )
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    for _ in range(3):
        assert project.run("tick").returncode == 0
    outcomes = [o for (o,) in project.query("SELECT outcome FROM attempts ORDER BY id")]
    assert outcomes == ["failed", "backoff", "failed"]
    third = (project.dir / "tasks" / "t1" / "prompt-3.md").read_text()
    assert "- r1" in third
    assert "session: [sess-1]" in third
