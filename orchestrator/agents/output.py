"""Reading an agent's stdout by its declared format (a stage's `output`).

`text` is stdout as it is; every other format is a kind's (`agents.kinds`):
`claude-json` Claude Code's one result envelope, `codex-jsonl` Codex CLI's
event stream. For an envelope the verdict is looked for in the agent's
final message, never in the envelope itself: the envelope is a JSON
object, and read as text it would be taken for the verdict. An envelope
that says `is_error` makes the attempt the agent's error, whatever the exit
status or `subtype` say.

Pure: the engine hands in the captured text and records what comes back.
"""

from __future__ import annotations

from typing import TypeAlias

from orchestrator.agents import kinds
from orchestrator.agents.usage import AgentOutput

# A format name: `text` or one a registered kind reads (`OUTPUT_FORMATS`).
OutputFormat: TypeAlias = str
OUTPUT_FORMATS: tuple[OutputFormat, ...] = kinds.FORMATS


def read_output(fmt: OutputFormat, stdout: str) -> AgentOutput:
    """Never raises: output that is not in the declared format is the
    agent's error (a verdict must not be read from a half-written envelope)."""
    kind = kinds.reading(fmt)
    if kind is None or kind.parse is None:
        return AgentOutput(stdout)
    return kind.parse(stdout)


def answer_text(fmt: OutputFormat, stdout: str) -> str:
    """What the agent said, for a person to read: the `result` of a Claude
    envelope, the last agent message of a Codex stream, the output itself
    otherwise, and also when it is not in its declared format (then the raw
    text is all there is to read)."""
    if fmt == "text":
        return stdout
    return read_output(fmt, stdout).message or stdout
