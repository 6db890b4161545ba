"""`resume = true`: the worker continues the agent session the stage's
previous attempt recorded (`{prev_session}`, from attempts.session_id)
instead of starting afresh, and starts afresh in the same attempt when the
agent says that session is gone (its files were cleaned, another machine).

Which flags resume a session is the agent's business, known here by the
stage's `output` format: Claude Code takes `--resume ID` anywhere among its
options; Codex's `exec` has a `resume ID` subcommand, placed before the
prompt argument (`-`)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from pathlib import Path

from orchestrator import safefs
from orchestrator.config import StageConfig
from orchestrator.runner import ProcessResult

SESSION = "{prev_session}"  # rendered by the runner like every placeholder
# A session id as the agents make them (a UUID, a thread id). The id is what
# the previous attempt's output said (or the usage file its commands can
# write); placed after `--resume`, a leading dash would be read as an option.
_PLAIN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
# What each agent prints when the session it is asked to resume does not exist.
_GONE = {
    "claude-json": ("No conversation found with session ID",),
    "codex-jsonl": ("No saved session found", "no rollout found", "thread not found"),
}


def resumed(stage: StageConfig, argv: tuple[str, ...]) -> tuple[str, ...] | None:
    """The worker argv that resumes the previous session, or None when the
    stage's agent has no known way to (`output = "text"`)."""
    if stage.output == "claude-json":
        return (argv[0], "--resume", SESSION, *argv[1:])
    if stage.output == "codex-jsonl" and "exec" in argv:
        prompt = len(argv) - 1 if argv[-1] == "-" else len(argv)
        return (*argv[:prompt], "resume", SESSION, *argv[prompt:])
    return None


def session_gone(stage: StageConfig, result: ProcessResult) -> bool:
    """Whether a failed resume failed because the session does not exist."""
    if result.ok:
        return False
    said = result.stdout[-4096:] + result.stderr[-4096:]
    return any(text.lower() in said.lower() for text in _GONE.get(stage.output, ()))


def run_worker(
    stage: StageConfig,
    session: str,
    argv: tuple[str, ...],
    run: Callable[[tuple[str, ...]], ProcessResult],
    note: Callable[[str], None],
) -> ProcessResult:
    """The worker, resuming `session` when the stage asks and there is one;
    a session that is gone is noted and the worker runs again, fresh, in the
    same attempt (so the attempt is counted once)."""
    again = resumed(stage, argv) if stage.resume and session else None
    if again is not None and _PLAIN_ID.fullmatch(session) is None:
        note(f"session id {session[:80]!a} is not a plain id; the worker started a fresh one")
        again = None
    if again is None:
        return run(argv)
    result = run(again)
    if not session_gone(stage, result):
        return result
    note(f"session {session} is gone; the worker started a fresh one")
    return run(argv)


def note_resume(state_dir: Path, said: str) -> None:
    """`resume.txt` in the attempt's folder says why the session was fresh;
    a disk that refuses it costs the attempt nothing."""
    with contextlib.suppress(OSError):
        safefs.replace(state_dir / "resume.txt", (said + "\n").encode())
