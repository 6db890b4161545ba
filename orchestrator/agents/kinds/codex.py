"""Codex CLI (`codex exec --json`): a stream of JSONL events.

Its events carry tokens, turns and the thread (the session), but no dollar
figure: a Codex stage's cost can only come from its usage file. What the
pinned CLI prints at a usage limit (read by running it against the scripted
server, tests/agents): for a `usage_limit_reached` answer an `error` and a
`turn.failed` event saying "You've hit your usage limit. ... try again at
4:52 PM." (the tick's local time; another day's as "Dec 29th, 2025 10:15
PM"); for any other 429, "exceeded retry limit, last status: 429 Too Many
Requests", with no time. `exec` has a `resume ID` subcommand, placed before
the prompt argument (`-`).

Inside our sandbox its own is turned off: it would run its own bubblewrap
inside ours (nested user namespaces, helper binaries it refuses to make
under a temporary home): one wall (docs/decisions/sandbox.md).
"""

from __future__ import annotations

from datetime import datetime, tzinfo

from orchestrator.agents.kind import AgentKind, Argv, LimitSaid, ResumeRule
from orchestrator.agents.reset import LIMIT_WORDS, reset_at, reset_in
from orchestrator.agents.usage import AgentOutput, Usage, as_count, as_text, json_object

_OWN_SANDBOX = ('"-s", "workspace-write"', '"-s", "read-only"')
_NO_SANDBOX = '"-s", "danger-full-access"'


def parse(stdout: str) -> AgentOutput:
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
        event = json_object(line)
        if event is None:
            continue
        kind = event.get("type")
        item = event.get("item")
        if kind == "thread.started":
            session = as_text(event.get("thread_id")) or session
        elif kind == "item.completed" and isinstance(item, dict):
            if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                message = item["text"]
        elif kind == "turn.completed":
            turns += 1
            pending_error = None
            used = event.get("usage")
            if isinstance(used, dict):
                input_tokens = (input_tokens or 0) + (as_count(used.get("input_tokens")) or 0)
                output_tokens = (output_tokens or 0) + (as_count(used.get("output_tokens")) or 0)
        elif kind in ("turn.failed", "error"):
            error = event.get("error")
            detail = error.get("message") if isinstance(error, dict) else event.get("message")
            if kind == "turn.failed":
                failed_turn = failed_turn or as_text(detail) or str(kind)
            else:
                pending_error = as_text(detail) or str(kind)
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


def usage_limit(stdout: str, now: datetime, local: tzinfo) -> LimitSaid | None:
    said: str | None = None
    for line in stdout.splitlines():
        event = json_object(line)
        if event is None:
            continue
        if event.get("type") == "turn.completed":
            said = None  # a limit it got past is no limit
        elif event.get("type") in ("error", "turn.failed"):
            error = event.get("error")
            text = error.get("message") if isinstance(error, dict) else event.get("message")
            if isinstance(text, str) and LIMIT_WORDS.search(text):
                said = text
    if said is None:
        return None
    return f"Codex: {said.strip()[:300]}", reset_at(said, now, local) or reset_in(said, now)


def resumed(argv: Argv, session: str) -> Argv | None:
    if "exec" not in argv:
        return None
    prompt = len(argv) - 1 if argv[-1] == "-" else len(argv)
    return (*argv[:prompt], "resume", session, *argv[prompt:])


def in_sandbox(text: str) -> str:
    for own in _OWN_SANDBOX:
        text = text.replace(own, _NO_SANDBOX)
    return text


KIND = AgentKind(
    name="codex",
    label="Codex CLI",
    output="codex-jsonl",
    provider="openai",
    parse=parse,
    usage_limit=usage_limit,
    carries=frozenset({"input_tokens", "output_tokens", "turns", "session_id"}),
    resume=ResumeRule(
        resumed, gone=("No saved session found", "no rollout found", "thread not found")
    ),
    program="codex",
    memory_mb=2048,
    subcommands=("exec", "e"),
    sandbox_ro=("~/.npm-global", "~/.local/bin", "~/.nvm"),
    sandbox_rw=("~/.codex",),
    in_sandbox=in_sandbox,
)
