"""`resume = true`: the worker continues the agent session the stage's
previous attempt recorded (`{prev_session}`, from attempts.session_id)
instead of starting afresh, and starts afresh in the same attempt when the
agent says that session is gone (its files were cleaned, another machine).

Which flags resume a session is the agent's business: its kind's resume
rule (`agents.kinds`), found by the stage's `output` format."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from pathlib import Path

from orchestrator import safefs
from orchestrator.agents import kinds
from orchestrator.config import StageConfig
from orchestrator.runner import ProcessResult

SESSION = "{prev_session}"  # rendered by the runner like every placeholder
# A session id as the agents make them (a UUID, a thread id). The id is what
# the previous attempt's output said (or the usage file its commands can
# write); placed after `--resume`, a leading dash would be read as an option.
_PLAIN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")


def resumed(stage: StageConfig, argv: tuple[str, ...]) -> tuple[str, ...] | None:
    """The worker argv that resumes the previous session, or None when the
    stage's agent has no known way to (`output = "text"`)."""
    kind = kinds.reading(stage.output)
    if kind is None or kind.resume is None:
        return None
    return kind.resume.argv(argv, SESSION)


def session_gone(stage: StageConfig, result: ProcessResult) -> bool:
    """Whether a failed resume failed because the session does not exist."""
    if result.ok:
        return False
    kind = kinds.reading(stage.output)
    if kind is None or kind.resume is None:
        return False
    said = result.stdout[-4096:] + result.stderr[-4096:]
    return any(text.lower() in said.lower() for text in kind.resume.gone)


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
