"""Reading a usage limit and its reset from what the pinned CLIs print (the
lines below were printed by Claude Code 2.1.197 and Codex CLI 0.171.0
against a server answering 429) and from a usage report."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from orchestrator.agents.limits import limit_in_output, limit_in_report

NOW = datetime(2026, 12, 1, 16, 22, 42, tzinfo=UTC)
CLAUDE_429 = (
    '{"type":"result","subtype":"success","is_error":true,"api_error_status":429,'
    '"duration_ms":435,"num_turns":1,"result":"API Error: Request rejected (429) · This '
    "request would exceed your account's rate limit. Please try again later.\","
    '"session_id":"139ea940","total_cost_usd":0}'
)
CODEX_USAGE = (
    '{"type":"thread.started","thread_id":"01a2"}\n'
    '{"type":"turn.started"}\n'
    '{"type":"error","message":"You’ve hit your usage limit. Upgrade to Pro '
    "(https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase "
    'more credits or try again at 4:52 PM."}\n'
    '{"type":"turn.failed","error":{"message":"You’ve hit your usage limit. Upgrade to Pro '
    '(https://chatgpt.com/explore/pro) or try again at 4:52 PM."}}\n'
)
CODEX_429 = (
    '{"type":"turn.started"}\n'
    '{"type":"error","message":"exceeded retry limit, last status: 429 Too Many Requests"}\n'
    '{"type":"turn.failed","error":{"message":"exceeded retry limit, last status: 429 Too '
    'Many Requests"}}\n'
)


def test_claude_codes_429_envelope_is_a_limit_without_a_reset() -> None:
    limit = limit_in_output("claude-json", CLAUDE_429, NOW, UTC)
    assert limit is not None and limit.reset is None
    assert "Request rejected (429)" in limit.reason


def test_claude_codes_older_pipe_time_is_its_reset() -> None:
    envelope = (
        '{"type":"result","is_error":true,"result":"Claude AI usage limit reached|1796143000"}'
    )
    limit = limit_in_output("claude-json", envelope, NOW, UTC)
    assert limit is not None and limit.reset == datetime.fromtimestamp(1796143000, UTC)


def test_an_ordinary_claude_error_is_no_limit() -> None:
    envelope = '{"type":"result","is_error":true,"result":"Not logged in"}'
    assert limit_in_output("claude-json", envelope, NOW, UTC) is None


def test_codexs_try_again_at_is_read_in_the_local_zone_to_the_minutes_end() -> None:
    limit = limit_in_output("codex-jsonl", CODEX_USAGE, NOW, UTC)
    assert limit is not None and limit.reset == datetime(2026, 12, 1, 16, 53, tzinfo=UTC)
    zone = timezone(timedelta(hours=2))  # the tick's zone: 4:52 PM there is 14:52 UTC...
    later = limit_in_output("codex-jsonl", CODEX_USAGE, NOW, zone)
    # ...which has passed today (18:22 there): the next 4:52 PM, tomorrow.
    assert later is not None and later.reset == datetime(2026, 12, 2, 14, 53, tzinfo=UTC)


def test_codexs_other_day_format_and_a_plain_429() -> None:
    text = CODEX_USAGE.replace("4:52 PM", "Dec 3rd, 2026 10:15 PM")
    limit = limit_in_output("codex-jsonl", text, NOW, UTC)
    assert limit is not None and limit.reset == datetime(2026, 12, 3, 22, 16, tzinfo=UTC)
    plain = limit_in_output("codex-jsonl", CODEX_429, NOW, UTC)
    assert plain is not None and plain.reset is None


def test_a_limit_codex_got_past_is_no_limit() -> None:
    recovered = CODEX_429 + '{"type":"turn.completed","usage":{}}\n'
    assert limit_in_output("codex-jsonl", recovered, NOW, UTC) is None


def test_limit_reset_in_a_usage_report() -> None:
    assert limit_in_report({"cost_usd": 1}, NOW) is None
    seconds = limit_in_report({"limit_reset": 30}, NOW)
    assert seconds is not None and seconds.reset == NOW + timedelta(seconds=30)
    iso = limit_in_report({"limit_reset": "2026-12-01T17:00:00"}, NOW)  # no zone: UTC
    assert iso is not None and iso.reset == datetime(2026, 12, 1, 17, tzinfo=UTC)
    past = limit_in_report({"limit_reset": "2020-01-01T00:00:00Z"}, NOW)
    assert past is not None and past.reset == NOW
    wild = limit_in_report({"limit_reset": 10**9}, NOW)  # decades ahead: not believed
    assert wild is not None and wild.reset is None
    junk = limit_in_report({"limit_reset": "soon"}, NOW)
    assert junk is not None and junk.reset is None


def test_a_reset_no_clock_can_hold_is_a_limit_without_a_reset() -> None:
    for value in (1e12, 10**23):  # past year 9999; past what a timedelta holds
        limit = limit_in_report({"limit_reset": value}, NOW)
        assert limit is not None and limit.reset is None
    late = CODEX_USAGE.replace("4:52 PM", "Dec 31st, 9999 11:59 PM")
    found = limit_in_output("codex-jsonl", late, NOW, UTC)
    assert found is not None and found.reset is None
    ages = CODEX_429.replace("429 Too Many Requests", "429, try again in 1e300 hours")
    ages = ages.replace("1e300", "9" * 300)
    found = limit_in_output("codex-jsonl", ages, NOW, UTC)
    assert found is not None and found.reset is None
