"""Reading an agent's stdout by its declared format (a stage's `output`).

`text` is stdout as it is. `claude-json` is Claude Code's one result
envelope (`claude -p --output-format json`); `codex-jsonl` is Codex CLI's
event stream (`codex exec --json`). For an envelope the verdict is looked
for in the agent's final message, never in the envelope itself: the
envelope is a JSON object, and read as text it would be taken for the
verdict. An envelope that says `is_error` makes the attempt the agent's
error, whatever the exit status or `subtype` say.

Pure: the engine hands in the captured text and records what comes back.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from orchestrator.domain.text import clean_text

OutputFormat = Literal["text", "claude-json", "codex-jsonl"]
OUTPUT_FORMATS: tuple[OutputFormat, ...] = ("text", "claude-json", "codex-jsonl")
# The usage columns are INTEGER (int4 on PostgreSQL): a larger count is no count.
MAX_COUNT = 2**31 - 1
MAX_SESSION_ID = 255


@dataclass(frozen=True)
class Usage:
    """What an agent reported spending; None where it said nothing."""

    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    turns: int | None = None
    duration_ms: int | None = None
    session_id: str | None = None

    @property
    def empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self))

    def filled_from(self, other: Usage) -> Usage:
        """Ours where we have a value, `other`'s where we have none."""
        return replace(
            self,
            **{
                f.name: getattr(other, f.name)
                for f in fields(self)
                if getattr(self, f.name) is None
            },
        )

    def plus(self, other: Usage) -> Usage:
        """Two commands of one attempt: numbers add up, the first session id stays."""
        summed: dict[str, Any] = {}
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if f.name == "session_id":
                summed[f.name] = mine if mine is not None else theirs
            elif mine is None or theirs is None:
                summed[f.name] = theirs if mine is None else mine
            else:
                summed[f.name] = mine + theirs
        return Usage(**summed)

    def columns(self) -> dict[str, Any]:
        """The attempt's columns of the same names. Sums (of turns, of two
        commands) are checked again: one past the columns' range is dropped,
        not allowed to make the attempt unrecordable."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, value in values.items():
            if name == "cost_usd":
                values[name] = _number(value)
            elif name != "session_id":
                values[name] = _count(value)
        return values


@dataclass(frozen=True)
class AgentOutput:
    """The text to look for the verdict in, the usage, and the agent's own error."""

    message: str
    usage: Usage = Usage()
    error: str | None = None


def read_output(fmt: OutputFormat, stdout: str) -> AgentOutput:
    """Never raises: output that is not in the declared format is the
    agent's error (a verdict must not be read from a half-written envelope)."""
    if fmt == "claude-json":
        return _claude_json(stdout)
    if fmt == "codex-jsonl":
        return _codex_jsonl(stdout)
    return AgentOutput(stdout)


def answer_text(fmt: OutputFormat, stdout: str) -> str:
    """What the agent said, for a person to read: the `result` of a Claude
    envelope, the last agent message of a Codex stream, the output itself
    otherwise, and also when it is not in its declared format (then the raw
    text is all there is to read)."""
    if fmt == "text":
        return stdout
    return read_output(fmt, stdout).message or stdout


def usage_from_report(data: object) -> Usage:
    """The usage a command wrote to `$ORCHESTRATOR_USAGE_FILE`
    (`cost_usd`, `input_tokens`, `output_tokens`, `session_id`, and
    optionally `turns`, `duration_ms`); keys of the wrong type are ignored."""
    if not isinstance(data, dict):
        return Usage()
    return Usage(
        cost_usd=_number(data.get("cost_usd")),
        input_tokens=_count(data.get("input_tokens")),
        output_tokens=_count(data.get("output_tokens")),
        turns=_count(data.get("turns")),
        duration_ms=_count(data.get("duration_ms")),
        session_id=_text(data.get("session_id")),
    )


def _claude_json(stdout: str) -> AgentOutput:
    envelope = _last_json_object(stdout.splitlines()) if stdout.strip() else None
    if envelope is None or envelope.get("type") != "result":
        head = stdout.strip()[:300] or "(no output)"
        return AgentOutput("", error=f"no Claude result envelope in the output: {head}")
    usage_block = envelope.get("usage")
    tokens = usage_block if isinstance(usage_block, dict) else {}
    inputs = [
        _count(tokens.get(key))
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    ]
    usage = Usage(
        cost_usd=_number(envelope.get("total_cost_usd")),
        input_tokens=None if all(n is None for n in inputs) else sum(n or 0 for n in inputs),
        output_tokens=_count(tokens.get("output_tokens")),
        turns=_count(envelope.get("num_turns")),
        duration_ms=_count(envelope.get("duration_ms")),
        session_id=_text(envelope.get("session_id")),
    )
    message = envelope.get("result")
    message = message if isinstance(message, str) else ""
    if envelope.get("is_error") is True:
        # What the agent said, not the envelope's `subtype`: Claude reports
        # "Not logged in" as `is_error` with subtype "success", which read
        # as a contradiction. The subtype says something only when the
        # agent said nothing (`error_max_turns`).
        detail = message.strip()[:500] or _text(envelope.get("subtype")) or "no message"
        return AgentOutput(message, usage, error=f"agent reported an error: {detail}")
    return AgentOutput(message, usage)


def _codex_jsonl(stdout: str) -> AgentOutput:
    message: str | None = None
    session: str | None = None
    turns = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    failed_turn: str | None = None
    # A top-level `error` is also how Codex reports a stream reconnect it
    # then recovers from: it is the run's failure only if no turn completed
    # after it.
    pending_error: str | None = None
    for line in stdout.splitlines():
        event = _json_object(line)
        if event is None:
            continue
        kind = event.get("type")
        item = event.get("item")
        if kind == "thread.started":
            session = _text(event.get("thread_id")) or session
        elif kind == "item.completed" and isinstance(item, dict):
            if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                message = item["text"]
        elif kind == "turn.completed":
            turns += 1
            pending_error = None
            used = event.get("usage")
            if isinstance(used, dict):
                input_tokens = (input_tokens or 0) + (_count(used.get("input_tokens")) or 0)
                output_tokens = (output_tokens or 0) + (_count(used.get("output_tokens")) or 0)
        elif kind in ("turn.failed", "error"):
            error = event.get("error")
            detail = error.get("message") if isinstance(error, dict) else event.get("message")
            if kind == "turn.failed":
                failed_turn = failed_turn or _text(detail) or str(kind)
            else:
                pending_error = _text(detail) or str(kind)
    usage = Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        turns=turns or None,
        session_id=session,
    )
    failure = failed_turn or pending_error
    if failure is not None:
        return AgentOutput(message or "", usage, error=f"agent reported an error: {failure}")
    if message is None:
        return AgentOutput("", usage, error="no agent message in the Codex JSONL output")
    return AgentOutput(message, usage)


def _last_json_object(lines: list[str]) -> dict[str, Any] | None:
    """The envelope is the last line; anything printed before it is noise."""
    for line in reversed(lines):
        found = _json_object(line)
        if found is not None:
            return found
    return None


def _json_object(line: str) -> dict[str, Any] | None:
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def _count(value: object) -> int | None:
    """A count the INTEGER columns can hold; anything else is no count, so
    that a wild report cannot make the attempt unrecordable."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if not 0 <= value <= MAX_COUNT:
        return None
    return int(value)


def _text(value: object) -> str | None:
    """Cleaned as every child's text is (no NUL, no lone surrogate), so the
    column takes it on SQLite and PostgreSQL alike."""
    if not isinstance(value, str):
        return None
    return clean_text(value, MAX_SESSION_ID) or None
