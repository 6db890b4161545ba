"""The agent's answer at a gate, as text a reviewer reads.

A stage that runs an agent CLI in a JSON format captures a JSON envelope
(Claude's `result` object, Codex's event stream); shown as it is, the
reviewer reads JSON with the answer escaped on one long line. Here the
answer is taken out of it (`agents.output.answer_text`); the raw capture
stays on the page beside it.

The capture is read from its end and at most `ANSWER_READ_BYTES` of it:
the envelope and the last agent message are printed last, and a capture
can be a megabyte or more.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator import safefs
from orchestrator.agents.output import OutputFormat, answer_text
from orchestrator.config import StageConfig

ANSWER_READ_BYTES = 256 * 1024
MAX_ANSWER_CHARS = 64 * 1024


@dataclass(frozen=True)
class Answer:
    text: str
    capture: str  # the capture file it was read from: worker.out or verifier.out
    fmt: OutputFormat
    cut: bool  # the capture or the answer was longer than what is shown


def agent_answer(folder: Path, stage: StageConfig | None) -> Answer | None:
    """The answer of the attempt whose state folder is `folder`; None when its
    agent said nothing. The agent is the worker, or for a stage without one,
    the verifier (a judging model)."""
    if stage is not None and stage.worker is None:
        capture, fmt = "verifier.out", stage.verifier_output
    else:
        capture, fmt = "worker.out", stage.output if stage is not None else "text"
    read = _tail(folder / capture, ANSWER_READ_BYTES)
    if read is None:
        return None
    data, cut = read
    text = answer_text(fmt, data.decode("utf-8", "replace"))
    if not text.strip():
        return None
    if len(text) > MAX_ANSWER_CHARS:
        text, cut = text[:MAX_ANSWER_CHARS], True
    return Answer(text, capture, fmt, cut)


def _tail(path: Path, limit: int) -> tuple[bytes, bool] | None:
    """The last `limit` bytes of the capture, and whether there was more.
    Through `safefs`: what a reviewer reads comes from the capture the tick
    wrote, never from where a link points, and a FIFO cannot hang the page."""
    try:
        data = safefs.read_tail(path, limit + 1)  # one more byte: was there more?
    except OSError:
        return None
    return (data[1:], True) if len(data) > limit else (data, False)
