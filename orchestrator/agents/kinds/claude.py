"""Claude Code (`claude -p --output-format json`): one result envelope.

The envelope carries everything an attempt records (cost, tokens, turns,
duration, session), so nothing of it is taken from the usage file. What
the pinned CLI prints at a usage limit (read by running it against the
scripted server, tests/agents): an envelope with `"is_error": true`,
`"api_error_status": 429` and a `result` such as "API Error: Request
rejected (429) · ...", and no reset time (the `retry-after` and
`anthropic-ratelimit-unified-reset` headers stay inside it), so the pool
waits its exponential pause. Older releases said "Claude AI usage limit
reached|<unix seconds>": that time is read. `--resume ID` goes anywhere
among its options.
"""

from __future__ import annotations

import re
from dataclasses import fields
from datetime import UTC, datetime, tzinfo

from orchestrator.agents.kind import AgentKind, Argv, LimitSaid, ResumeRule
from orchestrator.agents.reset import LIMIT_WORDS, reset_in
from orchestrator.agents.usage import (
    AgentOutput,
    Usage,
    as_count,
    as_number,
    as_text,
    last_json_object,
)

_PIPE_TIME = re.compile(r"limit reached\|(\d{9,11})")
_OPENING = '["claude", "-p",'


def parse(stdout: str) -> AgentOutput:
    envelope = last_json_object(stdout.splitlines()) if stdout.strip() else None
    if envelope is None or envelope.get("type") != "result":
        head = stdout.strip()[:300] or "(no output)"
        return AgentOutput("", error=f"no Claude result envelope in the output: {head}")
    usage_block = envelope.get("usage")
    tokens = usage_block if isinstance(usage_block, dict) else {}
    inputs = [
        as_count(tokens.get(key))
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    ]
    usage = Usage(
        cost_usd=as_number(envelope.get("total_cost_usd")),
        input_tokens=None if all(n is None for n in inputs) else sum(n or 0 for n in inputs),
        output_tokens=as_count(tokens.get("output_tokens")),
        turns=as_count(envelope.get("num_turns")),
        duration_ms=as_count(envelope.get("duration_ms")),
        session_id=as_text(envelope.get("session_id")),
    )
    message = envelope.get("result")
    message = message if isinstance(message, str) else ""
    if envelope.get("is_error") is True:
        # What the agent said, not the envelope's `subtype`: Claude reports
        # "Not logged in" as `is_error` with subtype "success", which read
        # as a contradiction. The subtype says something only when the
        # agent said nothing (`error_max_turns`).
        detail = message.strip()[:500] or as_text(envelope.get("subtype")) or "no message"
        return AgentOutput(message, usage, error=f"agent reported an error: {detail}")
    return AgentOutput(message, usage)


def usage_limit(stdout: str, now: datetime, local: tzinfo) -> LimitSaid | None:
    envelope = last_json_object(stdout.splitlines())
    if envelope is None or envelope.get("is_error") is not True:
        return None
    text = envelope.get("result")
    text = text if isinstance(text, str) else ""
    status = envelope.get("api_error_status")
    if status != 429 and not LIMIT_WORDS.search(text):
        return None
    pipe = _PIPE_TIME.search(text)
    if pipe is not None:
        reset: datetime | None = datetime.fromtimestamp(int(pipe.group(1)), UTC)
    else:
        reset = reset_in(text, now)
    return f"Claude Code: {text.strip()[:300] or 'API error 429'}", reset


def resumed(argv: Argv, session: str) -> Argv:
    return (argv[0], "--resume", session, *argv[1:])


def with_mcp(text: str, config_file: str, server: str) -> str:
    """Claude Code runs `-p` without asking: its tools outside the
    permission mode must be allowed by name, and `mcp__<server>` allows the
    server's tools. It connects MCP servers in the background and offers
    the model `WaitForMcpServers` meanwhile; a tool called before the server
    is up answers "still connecting", and the model waits and calls again."""
    return text.replace(
        _OPENING,
        f'["claude", "-p", "--mcp-config", "{config_file}", "--strict-mcp-config", '
        f'"--allowedTools", "mcp__{server}",',
    )


KIND = AgentKind(
    name="claude",
    label="Claude Code",
    output="claude-json",
    provider="anthropic",
    parse=parse,
    usage_limit=usage_limit,
    carries=frozenset(f.name for f in fields(Usage)),
    resume=ResumeRule(resumed, gone=("No conversation found with session ID",)),
    program="claude",
    memory_mb=2048,
    sandbox_ro=("~/.npm-global", "~/.local/bin", "~/.local/share/claude", "~/.nvm"),
    sandbox_rw=("~/.claude", "~/.claude.json", "~/.cache/claude"),
    mcp=with_mcp,
)
