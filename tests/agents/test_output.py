"""Reading agent output by format: the verdict comes from the final message,
`is_error` is the agent's error, usage is taken as reported. The envelopes
here are shaped as Claude Code 2.1.197 and Codex CLI 0.171.0 print them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.agents.output import answer_text, read_output
from orchestrator.agents.runtime import read_usage_file
from orchestrator.agents.usage import Usage, usage_from_report
from orchestrator.domain.verdict import parse_verdict

VERDICT = 'Reviewed.\n\n```json\n{"pass": false, "score": 0.4, "reasons": ["no tests"]}\n```\n'


def envelope(**over: object) -> str:
    data = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "duration_ms": 1234,
        "num_turns": 3,
        "result": VERDICT,
        "session_id": "efde0f0c-e57a",
        "total_cost_usd": 0.016,
        "usage": {
            "input_tokens": 2400,
            "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": 50,
            "output_tokens": 160,
        },
    }
    data.update(over)
    return json.dumps(data) + "\n"


def test_claude_envelope_verdict_is_in_the_final_message() -> None:
    out = read_output("claude-json", envelope())
    assert out.error is None
    verdict = parse_verdict(out.message)
    assert verdict is not None and verdict.passed is False and verdict.score == 0.4
    assert verdict.reasons == ("no tests",)
    assert out.usage == Usage(
        cost_usd=0.016,
        input_tokens=2550,
        output_tokens=160,
        turns=3,
        duration_ms=1234,
        session_id="efde0f0c-e57a",
    )
    # Read as text, the envelope itself would pass for a verdict (with no score).
    assert parse_verdict(envelope()) is not None
    assert read_output("text", envelope()).message == envelope()


def test_claude_is_error_wins_over_success_subtype() -> None:
    out = read_output("claude-json", envelope(is_error=True, result="API Error: 529 overloaded"))
    # What the agent said; the envelope's "success" would read as a contradiction.
    assert out.error == "agent reported an error: API Error: 529 overloaded"
    assert out.usage.cost_usd == 0.016  # still spent
    quiet = envelope(is_error=True, subtype="error_max_turns", result="")
    silent = read_output("claude-json", quiet)
    assert silent.error == "agent reported an error: error_max_turns"  # nothing said: the subtype


@pytest.mark.parametrize(
    "stdout",
    ["", "API Error: Connection refused\n", '{"type": "system"}\n', '{"type": "result"'],
)
def test_no_claude_envelope_is_the_agents_error(stdout: str) -> None:
    out = read_output("claude-json", stdout)
    assert out.error is not None and out.error.startswith("no Claude result envelope")
    assert out.message == ""


def test_claude_envelope_after_noise_and_bad_numbers() -> None:
    text = "warming up\n" + envelope(total_cost_usd=float("nan"), num_turns=True, usage=[])
    out = read_output("claude-json", text)
    assert out.error is None
    assert out.usage.cost_usd is None and out.usage.turns is None
    assert out.usage.input_tokens is None


CODEX = [
    {"type": "thread.started", "thread_id": "01a230cc"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_1", "type": "file_change"}},
    {"type": "item.completed", "item": {"id": "item_2", "type": "agent_message", "text": "draft"}},
    {"type": "item.completed", "item": {"id": "item_3", "type": "agent_message", "text": VERDICT}},
    {"type": "turn.completed", "usage": {"input_tokens": 2400, "output_tokens": 160}},
]


def jsonl(events: list[dict[str, object]]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def test_codex_jsonl_last_agent_message_and_usage() -> None:
    out = read_output("codex-jsonl", "not json\n" + jsonl(CODEX))
    assert out.error is None and out.message == VERDICT
    assert out.usage == Usage(input_tokens=2400, output_tokens=160, turns=1, session_id="01a230cc")


def test_codex_jsonl_failure_and_silence_are_errors() -> None:
    failed = read_output(
        "codex-jsonl", jsonl([*CODEX[:2], {"type": "turn.failed", "error": {"message": "429"}}])
    )
    assert failed.error == "agent reported an error: 429"
    silent = read_output("codex-jsonl", jsonl(CODEX[:3]))
    assert silent.error == "no agent message in the Codex JSONL output"


def test_usage_report_file(tmp_path: Path) -> None:
    path = tmp_path / "u.json"
    assert read_usage_file(path) == Usage()  # none written
    path.write_text('{"cost_usd": 0.25, "input_tokens": 10, "output_tokens": "x", "session_id": 7}')
    assert read_usage_file(path) == Usage(cost_usd=0.25, input_tokens=10)
    path.write_text("{broken")
    assert read_usage_file(path) == Usage()
    path.write_text(json.dumps({"cost_usd": 1, "pad": "x" * 70000}))
    assert read_usage_file(path) == Usage()  # too large to be a report
    assert usage_from_report([1, 2]) == Usage()
    assert usage_from_report({"cost_usd": -1, "turns": 2}) == Usage(turns=2)


def test_usage_sums_and_fills() -> None:
    worker = Usage(cost_usd=0.5, input_tokens=10, session_id="w")
    verifier = Usage(cost_usd=0.25, output_tokens=3, session_id="v")
    assert worker.plus(verifier) == Usage(
        cost_usd=0.75, input_tokens=10, output_tokens=3, session_id="w"
    )
    assert Usage(turns=1).filled_from(worker) == Usage(
        cost_usd=0.5, input_tokens=10, turns=1, session_id="w"
    )
    assert Usage().empty and not worker.empty


# review finding: Codex CLI prints a transient stream error (it then retries,
# `stream_max_retries` defaults to 5) as a top-level `{"type": "error"}` event
# (codex-rs exec: EventMsg::StreamError -> ThreadEvent::Error). A run that
# reconnected and then finished its turn is read as the agent's error and the
# attempt becomes a worker_error, its verdict dropped.
def test_codex_reconnect_notice_then_a_completed_turn_is_not_an_error() -> None:
    lines = [
        {"type": "thread.started", "thread_id": "t-1"},
        {"type": "turn.started"},
        {"type": "error", "message": "Reconnecting... 1/5 (stream disconnected before completion)"},
        {"type": "item.completed", "item": {"id": "i0", "type": "agent_message", "text": VERDICT}},
        {"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 2}},
    ]
    out = read_output("codex-jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    assert out.error is None
    verdict = parse_verdict(out.message)
    assert verdict is not None and verdict.score == 0.4


def test_answer_text_is_the_agents_final_message() -> None:
    assert answer_text("claude-json", "warming up\n" + envelope()) == VERDICT
    assert answer_text("codex-jsonl", "not json\n" + jsonl(CODEX)) == VERDICT
    assert answer_text("text", envelope()) == envelope()  # text is shown as it is


@pytest.mark.parametrize(
    ("fmt", "stdout"),
    [
        ("claude-json", "API Error: Connection refused\n"),
        ("claude-json", '{"type": "result"'),  # an envelope cut short
        ("codex-jsonl", jsonl([{"type": "thread.started", "thread_id": "t"}])),
    ],
)
def test_answer_text_without_a_final_message_is_the_raw_output(fmt: str, stdout: str) -> None:
    assert answer_text(fmt, stdout) == stdout  # type: ignore[arg-type]
