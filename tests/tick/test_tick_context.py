"""`AttemptContext` is the one source of what an attempt is told: its
placeholders, environment and prompt fields agree, and setup is told less."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from orchestrator import runner
from orchestrator.tick.attempt_context import AttemptContext


def _context(tmp_path: Path) -> AttemptContext:
    return AttemptContext(
        task="fix-login",
        title="Fix the login",
        body="It fails\x00 on {task}",
        stage="implement",
        attempt=3,
        workspace=tmp_path / "fix-login",
        hint="try the cache",
        prev_outcome="failed",
        prev_score="0.4",
        config_dir=str(tmp_path),
        context_file=tmp_path / "context.json",
        prev_session="sess-1",
        candidate=2,
    ).with_prompt(tmp_path / "prompt.md")


def test_a_command_sees_the_same_values_in_argv_and_environment(tmp_path: Path) -> None:
    feedback = (tmp_path / "feedback.json", "alice: use UTC")
    context = _context(tmp_path).with_feedback((feedback[1], feedback[0]))
    argv = runner.render_argv(
        [
            sys.executable,
            "-c",
            "import json, os, sys; print(json.dumps([sys.argv[1:], dict(os.environ)]))",
        ]
        + [f"{{{name}}}" for name in runner.PLACEHOLDERS],
        context.placeholders(),
    )
    env = runner.child_environment({}, deny=(), extra={}, orchestrator_vars=context.environment())
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    args, seen = json.loads(out)
    assert args == [
        "fix-login",
        "implement",
        "3",
        str(tmp_path / "fix-login"),
        str(tmp_path / "prompt.md"),
        "try the cache",
        str(tmp_path),
        str(tmp_path / "context.json"),
        "sess-1",
        "2",
        "alice: use UTC",
    ]
    assert seen["ORCHESTRATOR_FEEDBACK"] == str(feedback[0])
    assert seen["ORCHESTRATOR_CONTEXT_FILE"] == args[7]
    assert seen["ORCHESTRATOR_CANDIDATE"] == args[9]
    assert seen["ORCHESTRATOR_TASK"] == args[0]
    assert seen["ORCHESTRATOR_STAGE"] == args[1]
    assert seen["ORCHESTRATOR_ATTEMPT"] == args[2]
    assert seen["ORCHESTRATOR_WORKSPACE"] == args[3]
    assert seen["ORCHESTRATOR_PROMPT_FILE"] == args[4]
    assert seen["ORCHESTRATOR_NEXT_HINT"] == args[5]
    assert seen["ORCHESTRATOR_PREV_OUTCOME"] == "failed"
    assert seen["ORCHESTRATOR_PREV_SCORE"] == "0.4"


def test_setup_is_told_only_which_task_and_where(tmp_path: Path) -> None:
    setup = _context(tmp_path).for_setup()
    assert setup.placeholders()["hint"] == ""
    assert setup.placeholders()["prompt_file"] == ""
    assert setup.setup_environment() == {
        "ORCHESTRATOR_TASK": "fix-login",
        "ORCHESTRATOR_WORKSPACE": str(tmp_path / "fix-login"),
    }


def test_the_prompt_fills_its_fields_once_and_cleans_them(tmp_path: Path) -> None:
    text = _context(tmp_path).render_prompt(
        "{title}: {body} (attempt {attempt}, after {prev_outcome} {prev_score}; {hint}) {other}"
    )
    # A value's own braces are not filled again; a NUL never reaches the file.
    assert "\x00" not in text
    assert text == (
        "Fix the login: It fails on {task} (attempt 3, after failed 0.4; try the cache) {other}"
    )
