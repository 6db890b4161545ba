"""Events and hooks (issue 16): the outbox, at-least-once delivery with
backoff, a tick killed before delivering, a hook that hangs."""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from support import DEFAULT_STAGES, Project, check_invariants


def hook(name: str, on: list[str], command: list[str], **extra: float) -> str:
    lines = [
        "[[hooks]]",
        f"name = {json.dumps(name)}",
        f"on = {json.dumps(on)}",
        f"command = {json.dumps(command)}",
        *(f"{key} = {value}" for key, value in extra.items()),
    ]
    return "\n" + "\n".join(lines) + "\n"


# A hook that hangs sleeps far past any test's patience (a try that ended by
# itself would be delivered, so a timed-out row proves the timeout ended it);
# PATIENCE is the safety net for a tick that would otherwise hang.
HANG = 600
PATIENCE = 600.0


def hanging(starts: Path | None = None) -> list[str]:
    """A hook that hangs; with `starts`, it first notes when it started."""
    note = "" if starts is None else f"open({str(starts)!r}, 'a').write(f'{{time.time()}}\\n'); "
    return [sys.executable, "-c", f"import time; {note}time.sleep({HANG})"]


def recorder(path: Path) -> list[str]:
    return ["sh", "-c", f"cat >> '{path}'"]


def received(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def deliveries(project: Project) -> list[tuple[object, ...]]:
    return project.query(
        "SELECT e.kind, d.hook, d.tries, d.last_error, d.delivered_at "
        "FROM deliveries d JOIN events e ON e.id = d.event_id ORDER BY d.id"
    )


def test_a_recording_hook_gets_each_event_once(project: Project, tmp_path: Path) -> None:
    out = tmp_path / "hook.jsonl"
    project.write_config(
        DEFAULT_STAGES + hook("rec", ["awaiting_approval", "complete"], recorder(out))
    )
    assert project.cli("add", "t1", "--title", "first").exit_code == 0
    assert project.cli("tick").exit_code == 0
    first = received(out)
    assert [e["kind"] for e in first] == ["awaiting_approval"]
    event = first[0]
    assert event["task"] == "t1" and event["stage"] == "research"
    assert event["state"] == "research:awaiting_approval"
    assert event["scores"] == [{"attempt": 1, "score": 0.9}]
    assert event["links"]["approve"] == "orchestrator approve t1"  # type: ignore[index]

    assert project.cli("approve", "t1").exit_code == 0
    assert project.cli("tick").exit_code == 0
    assert project.state("t1") == "complete"
    assert project.cli("tick").exit_code == 0  # nothing new: nothing sent again
    kinds = [e["kind"] for e in received(out)]
    assert kinds == ["awaiting_approval", "complete"]
    rows = deliveries(project)
    assert [(r[0], r[2], r[3]) for r in rows] == [
        ("awaiting_approval", 1, None),
        ("complete", 1, None),
    ]
    assert all(r[4] is not None for r in rows)

    listed = project.cli("events", "--json")
    assert listed.exit_code == 0, listed.output
    data = json.loads(listed.output)
    assert [e["kind"] for e in data] == ["awaiting_approval", "complete"]
    assert data[0]["deliveries"][0]["hook"] == "rec"
    pending = project.cli("events", "--pending", "--json")
    assert json.loads(pending.output) == []
    assert check_invariants(project.db_url, allow_running=False) == []


def test_a_failing_hook_is_retried_with_backoff_and_its_tries_recorded(
    project: Project, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    # Fails its first two calls, then succeeds; notes the time of each call.
    script = (
        f"date +%s.%N >> '{calls}'; "
        f"n=$(wc -l < '{calls}'); cat > /dev/null; "
        'if [ "$n" -lt 3 ]; then echo "down for maintenance" >&2; exit 7; fi'
    )
    project.write_config(
        DEFAULT_STAGES
        + hook("flaky", ["awaiting_approval"], ["sh", "-c", script], retry_seconds=0.5)
    )
    assert project.cli("add", "t1", "--title", "first").exit_code == 0
    first = project.cli("tick")
    # issue 22, item 14: printed a delivery error, so no exit 0: 75, try again later.
    assert first.exit_code == 75, first.output
    assert "down for maintenance" in first.stderr and "next try in 0.5 s" in first.stderr
    closed = project.query("SELECT exit_code FROM ticks ORDER BY id DESC LIMIT 1")
    assert closed == [(75,)]
    row = deliveries(project)[0]
    assert row[2] == 1 and "exit 7: down for maintenance" in str(row[3]) and row[4] is None
    pending = json.loads(project.cli("events", "--pending", "--json").output)
    assert len(pending) == 1 and pending[0]["deliveries"][0]["tries"] == 1

    deadline = time.monotonic() + PATIENCE  # a safety net
    while deliveries(project)[0][4] is None:  # later ticks retry once it is due
        assert time.monotonic() < deadline, deliveries(project)
        # 75 while its tries fail, 0 once it is delivered (or not yet due)
        assert project.cli("tick").exit_code in (0, 75)
    kind, _, tries, error, delivered = deliveries(project)[0]
    assert (kind, tries, error) == ("awaiting_approval", 3, None) and delivered is not None
    stamps = [float(line) for line in calls.read_text().split()]
    assert len(stamps) == 3
    # Doubling waits: at least 0.5 s, then at least 1 s.
    assert stamps[1] - stamps[0] >= 0.5
    assert stamps[2] - stamps[1] >= 1.0


def test_a_tick_killed_after_the_commit_delivers_at_the_next_tick(
    project: Project, tmp_path: Path
) -> None:
    out = tmp_path / "hook.jsonl"
    project.write_config(DEFAULT_STAGES + hook("rec", ["awaiting_approval"], recorder(out)))
    assert project.cli("add", "t1", "--title", "first").exit_code == 0
    died = project.run("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": "after_event_commit:exit"})
    assert died.returncode == 137, died.stderr
    assert project.state("t1") == "research:awaiting_approval"  # the transition committed
    assert received(out) == []
    assert project.query("SELECT count(*) FROM events") == [(1,)]
    pending = json.loads(project.cli("events", "--pending", "--json").output)
    assert [e["kind"] for e in pending] == ["awaiting_approval"]

    again = project.run("tick")
    assert again.returncode == 0, again.stderr
    assert [e["kind"] for e in received(out)] == ["awaiting_approval"]
    assert project.run("tick").returncode == 0
    assert len(received(out)) == 1


def test_a_hook_hanging_past_its_timeout_delays_nothing_else(
    project: Project, tmp_path: Path
) -> None:
    out = tmp_path / "fast.jsonl"
    project.write_config(
        DEFAULT_STAGES
        + hook("slow", ["awaiting_approval"], hanging(), timeout_seconds=2)
        + hook("fast", ["awaiting_approval"], recorder(out))
    )
    for slug in ("t1", "t2", "t3"):
        assert project.cli("add", slug, "--title", slug).exit_code == 0
    result = project.run("tick", timeout=PATIENCE)
    assert result.returncode == 75, result.stderr  # the slow hook's tries failed: try again
    assert sorted(e["task"] for e in received(out)) == ["t1", "t2", "t3"]
    rows = deliveries(project)
    fast = [r for r in rows if r[1] == "fast"]
    slow = [r for r in rows if r[1] == "slow"]
    assert all(r[2] == 1 and r[4] is not None for r in fast)
    assert all(r[4] is None and "timed out after 2 s" in str(r[3]) for r in slow)
    # The pipeline went on meanwhile: all three ran while the first event's slow hook hung.
    assert [project.state(s) for s in ("t1", "t2", "t3")] == ["research:awaiting_approval"] * 3


def test_without_hooks_the_tick_leaves_events_to_the_first_hook(
    project: Project, tmp_path: Path
) -> None:
    assert project.cli("add", "t1", "--title", "first").exit_code == 0
    assert project.cli("add", "t2", "--title", "second").exit_code == 0
    assert project.cli("tick").exit_code == 0
    assert project.query("SELECT count(*) FROM events WHERE dispatched_at IS NULL") == [(2,)]
    assert json.loads(project.cli("events", "--pending", "--json").output) == []
    # One of them is old news by the time a hook appears.
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import create_engine, update

    from orchestrator.storage import tables

    engine = create_engine(project.db_url)
    with engine.begin() as conn:
        conn.execute(
            update(tables.events)
            .where(tables.events.c.id == 1)
            .values(at=datetime.now(UTC) - timedelta(days=2))
        )
    engine.dispose()
    out = tmp_path / "hook.jsonl"
    project.write_config(DEFAULT_STAGES + hook("rec", ["awaiting_approval"], recorder(out)))
    assert project.cli("tick").exit_code == 0
    assert [e["task"] for e in received(out)] == ["t2"]
    assert project.query("SELECT count(*) FROM events WHERE dispatched_at IS NULL") == [(0,)]


def test_an_attempt_recovered_as_crashed_is_an_event(project: Project, tmp_path: Path) -> None:
    out = tmp_path / "hook.jsonl"
    project.write_config(DEFAULT_STAGES + hook("rec", ["crashed"], recorder(out)))
    assert project.cli("add", "t1", "--title", "first").exit_code == 0
    # Dead after its worker ran (an attempt whose commands never started
    # is closed `host_error`, no crash).
    died = project.run("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": "after_worker:exit"})
    assert died.returncode == 137, died.stderr
    # Same host, dead tick: the next tick recovers the attempt and says so.
    again = project.run("tick")
    assert again.returncode == 0, again.stderr
    (event,) = received(out)
    assert event["kind"] == "crashed" and event["task"] == "t1" and event["attempt"] == 1
    assert event["outcome"] == "crashed" and event["stage"] == "research"


def test_many_events_for_a_hanging_hook_delay_the_tick_by_one_timeout_at_most(
    project: Project, tmp_path: Path
) -> None:
    # review finding: Courier.close() keeps claiming new tries while it waits
    # for those in flight, MAX_IN_FLIGHT (8) at a time, and the hanging hook's
    # deliveries (ordered by next_try_at, id) take every slot: N events for a
    # hook that hangs make the tick's end wait ceil(N/8) timeouts (and hold the
    # other hooks' tries back meanwhile), not "never past a hook's timeout".
    # Counted, not timed: once the tick's work is done, the hanging hook
    # starts at most one round of MAX_IN_FLIGHT tries (where the bug started
    # all 40, one round per timeout). Rounds during the tick are by design;
    # the timeout leaves a stall of 20 s between the last attempt and the
    # tick's close to count as one.
    from orchestrator.events.courier import MAX_IN_FLIGHT

    out, starts = tmp_path / "fast.jsonl", tmp_path / "slow-starts"
    project.write_config(
        DEFAULT_STAGES
        + hook("slow", ["awaiting_approval"], hanging(starts), timeout_seconds=20)
        + hook("fast", ["awaiting_approval"], recorder(out))
    )
    specs = "\n".join(json.dumps({"slug": f"t{i:02d}", "title": "t"}) for i in range(40))
    assert project.cli("add", "--from", "-", input=specs).exit_code == 0
    result = project.run("tick", "--jobs", "8", timeout=PATIENCE)
    assert result.returncode == 75, result.stderr  # the slow hook's tries failed: try again
    assert len(received(out)) == 40
    [(last,)] = project.query("SELECT max(finished_at) FROM attempts")
    finished = last if isinstance(last, datetime) else datetime.fromisoformat(last)
    done = (finished if finished.tzinfo else finished.replace(tzinfo=UTC)).timestamp()
    started = [float(line) for line in starts.read_text().split()]
    after = [t for t in started if t > done]
    assert len(after) <= MAX_IN_FLIGHT, (len(started), len(after))


def test_an_event_written_while_a_hook_was_configured_is_delivered_however_late(
    project: Project, tmp_path: Path
) -> None:
    # review finding: store.dispatch drops every event older than STALE_AFTER
    # (1 day) on the assumption that it "was written while no hook was
    # configured"; but a human command (`halt`, here) writes events with hooks
    # configured and no courier running: if no tick runs for a day (a weekend,
    # a paused cron) that event is never delivered - not at-least-once.
    out = tmp_path / "hook.jsonl"
    project.write_config(DEFAULT_STAGES + hook("rec", ["halted"], recorder(out)))
    assert project.cli("add", "t1", "--title", "first").exit_code == 0
    assert project.cli("halt", "t1", "--note", "stop").exit_code == 0
    assert project.query("SELECT kind FROM events") == [("halted",)]
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import create_engine, update

    from orchestrator.storage import tables

    engine = create_engine(project.db_url)
    with engine.begin() as conn:  # no tick ran for two days
        conn.execute(update(tables.events).values(at=datetime.now(UTC) - timedelta(days=2)))
    engine.dispose()
    assert project.cli("tick").exit_code == 0
    assert [e["kind"] for e in received(out)] == ["halted"]


def test_a_command_hands_its_event_to_the_hooks_configured_as_it_writes_it(
    project: Project, tmp_path: Path
) -> None:
    out = tmp_path / "hook.jsonl"
    project.write_config(
        DEFAULT_STAGES
        + hook("rec", ["halted", "complete"], recorder(out))
        + hook("gates", ["awaiting_approval"], recorder(out))
    )
    assert project.cli("add", "t1", "--title", "first").exit_code == 0
    assert project.cli("halt", "t1", "--note", "stop").exit_code == 0
    # Handed out in halt's own transaction, to the hook that wants it; no tick yet.
    assert deliveries(project) == [("halted", "rec", 0, None, None)]
    assert project.query("SELECT count(*) FROM events WHERE dispatched_at IS NULL") == [(0,)]
    # A hook added afterwards does not get it; the one configured then does.
    project.write_config(
        DEFAULT_STAGES
        + hook("rec", ["halted", "complete"], recorder(out))
        + hook("late", ["halted"], recorder(out))
    )
    assert project.cli("tick").exit_code == 0
    assert [(r[1], r[2]) for r in deliveries(project)] == [("rec", 1)]
    assert [e["kind"] for e in received(out)] == ["halted"]


# review finding: a hook runs with the tick's whole environment (courier:
# `{**os.environ, ...}`): it sees ORCHESTRATOR_DB_URL (the database's
# credentials) and every key `env_deny` holds back from workers and verifiers,
# while runner.child_environment promises "a child must never see our
# credentials". A Slack hook is a third-party script; it needs neither.
def test_a_hook_sees_neither_the_database_url_nor_denied_keys(
    project: Project, tmp_path: Path
) -> None:
    out = tmp_path / "hook-env.txt"
    dump = ["sh", "-c", f"env > '{out}'"]
    project.write_config(DEFAULT_STAGES + hook("env", ["awaiting_approval"], dump))
    config = project.config.read_text().replace(
        "[orchestrator]\n", '[orchestrator]\nenv_deny = ["MY_API_KEY"]\n', 1
    )
    project.config.write_text(config)
    assert project.run("add", "t1", "--title", "first").returncode == 0
    done = project.run("tick", extra_env={"MY_API_KEY": "s3cret"})
    assert done.returncode == 0, done.stderr
    seen = out.read_text()
    assert "ORCHESTRATOR_EVENT_KIND=awaiting_approval" in seen
    assert "s3cret" not in seen
    assert "ORCHESTRATOR_DB_URL" not in seen


# Issue 22, item 9: past 1,024 failed tries `2 ** (tries - 1)` no longer fits
# a float, so the backoff raised OverflowError before the cap applied; the
# courier recorded a pass's results in one transaction, so the error rolled
# back every result of the pass (a working hook's included) and that hook was
# sent the same event again by a later tick.
def test_a_hook_failing_past_1024_tries_backs_off_and_spoils_no_other_result(
    project: Project, tmp_path: Path
) -> None:
    out = tmp_path / "rec.jsonl"
    down = tmp_path / "down"
    ran = tmp_path / "flaky-ran"
    down.touch()
    flaky = f"touch '{ran}'; cat > /dev/null; if [ -e '{down}' ]; then echo busy >&2; exit 3; fi"
    # The working hook ends after the failing one did (so both results meet
    # in one pass of the old courier); bounded, never a fixed sleep.
    rec = (
        f"cat >> '{out}'; n=0; "
        f"while [ ! -e '{ran}' ] && [ $n -lt 1000 ]; do sleep 0.01; n=$((n+1)); done"
    )
    project.write_config(
        DEFAULT_STAGES
        + hook(
            "flaky",
            ["awaiting_approval"],
            ["sh", "-c", flaky],
            retry_seconds=0.2,
            max_retry_seconds=1,
        )
        + hook("rec", ["awaiting_approval", "halted"], ["sh", "-c", rec])
    )
    assert project.cli("add", "t1", "--title", "first").exit_code == 0
    assert project.cli("add", "t2", "--title", "second").exit_code == 0
    # The flaky hook fails its first try: the tick says so (75, try again later).
    assert project.run("tick", "--task", "t1").returncode == 75
    # 1,100 failed tries of the first event, the last one long ago.
    from datetime import UTC, datetime

    from sqlalchemy import create_engine, update

    from orchestrator.storage import tables

    engine = create_engine(project.db_url)
    with engine.begin() as conn:
        conn.execute(
            update(tables.deliveries)
            .where(tables.deliveries.c.hook == "flaky")
            .values(tries=1100, next_try_at=datetime(2000, 1, 1, tzinfo=UTC))
        )
    engine.dispose()
    assert project.cli("halt", "t2", "--note", "later").exit_code == 0  # rec's second event
    ran.unlink()
    tick = project.run("tick", "--task", "t1")
    assert tick.returncode == 75, tick.stderr  # the flaky hook failed again: try later
    assert "delivering events" not in tick.stderr and "Overflow" not in tick.stderr
    assert "try 1101: exit 3: busy; next try in 1 s" in tick.stderr
    rows = {(r[0], r[1]): r for r in deliveries(project)}
    flaky_row = rows[("awaiting_approval", "flaky")]
    assert flaky_row[2] == 1101 and flaky_row[3] == "exit 3: busy" and flaky_row[4] is None
    assert all(r[4] is not None and r[2] == 1 for key, r in rows.items() if key[1] == "rec")

    down.unlink()  # the hook works again: the capped wait (1 s) lets it in soon
    deadline = time.monotonic() + PATIENCE  # a safety net
    while rows[("awaiting_approval", "flaky")][4] is None:
        assert time.monotonic() < deadline, rows
        assert project.run("tick", "--task", "t1").returncode in (0, 75)  # 75: not yet due
        rows = {(r[0], r[1]): r for r in deliveries(project)}
    assert rows[("awaiting_approval", "flaky")][2] == 1102
    kinds = sorted((e["kind"], e["task"]) for e in received(out))
    assert kinds == [("awaiting_approval", "t1"), ("halted", "t2")]  # each exactly once
    assert check_invariants(project.db_url, allow_running=False) == []
