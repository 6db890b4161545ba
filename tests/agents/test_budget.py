"""Usage reported through $ORCHESTRATOR_USAGE_FILE, budgets per stage and
per task, and secrets that reach only the stages naming them: real tick
processes on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import Project, copy_database, make_project

from orchestrator.config import load_settings
from orchestrator.errors import ConfigError

pytestmark = pytest.mark.e2e


def paying(cost: float, verdict: str = '{"pass": false, "score": 0.1}') -> str:
    """A worker that reports `cost` through its usage file, then a verdict."""
    report = (
        f'{{"cost_usd": {cost}, "input_tokens": 7, "session_id": "s-\'$ORCHESTRATOR_ATTEMPT\'"}}'
    )
    script = f"printf '{report}' > \"$ORCHESTRATOR_USAGE_FILE\"; echo '{verdict}'"
    return json.dumps(["sh", "-c", script])


def stages(worker: str, extra: str = "") -> str:
    return f"""
[defaults]
max_attempts = 10
plateau = {{ patience = 10 }}

[[pipelines.default.stages]]
name = "build"
worker = {worker}
{extra}
"""


def halt_reason(project: Project, slug: str) -> tuple[str, str | None]:
    [(status, reason)] = project.query(
        "SELECT status, halt_reason FROM tasks WHERE slug = :s", s=slug
    )
    return status, reason


def costs(project: Project) -> list[float]:
    return [row[0] for row in project.query("SELECT cost_usd FROM attempts ORDER BY id")]


def test_stage_budget_halts_before_the_next_claim(tmp_path: Path, migrated_url: str) -> None:
    project = make_project(tmp_path / "p", migrated_url, stages(paying(0.4), "max_cost_usd = 1.0"))
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "t1", "--title", "Costly").returncode == 0
    out = project.run("tick")
    assert out.returncode == 0, out.stderr
    assert costs(project) == pytest.approx([0.4, 0.4, 0.4])  # 1.2 >= 1.0: no fourth
    assert halt_reason(project, "t1") == ("halted", "budget")
    assert "halted (budget: $1.2000 spent of the stage build budget $1.0000)" in out.stdout
    [(reason,)] = project.query("SELECT reason FROM transitions WHERE event = 'halt'")
    assert reason.startswith("budget reached")
    assert project.query("SELECT session_id, input_tokens FROM attempts")[0] == ("s-1", 7)

    # A plain resume is not enough: the stage's limit counts every run.
    assert project.run("resume", "t1").returncode == 0
    dry = project.run("tick", "--dry-run")
    assert "t1: would halt (budget: $1.2000 spent of the stage build budget" in dry.stdout
    assert project.run("tick").returncode == 0
    assert halt_reason(project, "t1") == ("halted", "budget")
    assert len(costs(project)) == 3

    refused = project.run("resume", "t1", "--budget", "1.2")
    assert refused.returncode == 1 and "not above the $1.2000" in refused.stderr
    assert halt_reason(project, "t1") == ("halted", "budget")  # nothing changed

    assert project.run("resume", "t1", "--budget", "2").returncode == 0
    assert project.run("tick").returncode == 0
    assert costs(project) == pytest.approx([0.4] * 5)  # the task's own budget replaces it
    assert halt_reason(project, "t1") == ("halted", "budget")

    listed = json.loads(project.run("list", "--json").stdout)
    assert listed[0]["cost_usd"] == pytest.approx(2.0) and listed[0]["budget"] == 2.0
    shown = project.run("show", "t1")
    assert "cost      $2.0000 of a $2.0000 budget" in shown.stdout
    scores = json.loads(project.run("scores", "t1", "--json").stdout)
    assert [row["cost_usd"] for row in scores] == pytest.approx([0.4] * 5)
    rows = project.query("SELECT task, stage, attempts, cost_usd, input_tokens FROM costs")
    assert rows == [("t1", "build", 5, pytest.approx(2.0), 35)]


def test_task_budget_from_add_and_both_commands_report(tmp_path: Path, migrated_url: str) -> None:
    verifier = json.dumps(
        [
            "sh",
            "-c",
            'printf \'{"cost_usd": 0.1, "output_tokens": 3}\' > "$ORCHESTRATOR_USAGE_FILE";'
            ' echo \'{"pass": false, "score": 0.2}\'',
        ]
    )
    project = make_project(
        tmp_path / "p",
        migrated_url,
        stages(paying(0.4, "no verdict here"), f"verifier = {verifier}"),
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "t1", "--title", "Capped", "--budget", "1").returncode == 0
    assert project.run("tick").returncode == 0
    # Worker and verifier each report; the attempt records the sum.
    assert costs(project) == pytest.approx([0.5, 0.5])
    assert project.query("SELECT input_tokens, output_tokens FROM attempts")[0] == (7, 3)
    assert halt_reason(project, "t1") == ("halted", "budget")
    folder = tmp_path / "p" / "state" / "t1" / "build-001"
    assert json.loads((folder / "verifier.usage.json").read_text())["cost_usd"] == 0.1


def test_secrets_reach_only_the_stages_naming_them(tmp_path: Path, migrated_url: str) -> None:
    echo = json.dumps(["sh", "-c", 'echo "{\\"pass\\": true, \\"reasons\\": [\\"[$MY_KEY]\\"]}"'])
    project = make_project(
        tmp_path / "p",
        migrated_url,
        f"""
[[pipelines.default.stages]]
name = "first"
worker = {echo}
secrets = ["MY_KEY"]

[[pipelines.default.stages]]
name = "second"
worker = {echo}
""",
        env_deny=["MY_KEY"],
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "t1", "--title", "Keys").returncode == 0
    assert project.run("tick", extra_env={"MY_KEY": "s3cret"}).returncode == 0
    rows = project.query("SELECT stage, reasons FROM attempts ORDER BY id")
    assert rows == [("first", '["[s3cret]"]'), ("second", '["[]"]')]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('output = "json"', "'text' or 'claude-json' or 'codex-jsonl'"),
        ("max_cost_usd = 0", "max_cost_usd"),
        ('secrets = ["ORCHESTRATOR_DB_URL"]', "not an environment variable name a stage"),
        ('secrets = "KEY"', "a list of strings"),
    ],
)
def test_agent_keys_are_checked(tmp_path: Path, line: str, problem: str) -> None:
    config = tmp_path / "orchestrator.toml"
    config.write_text(f'[[pipelines.default.stages]]\nname = "a"\nworker = ["true"]\n{line}\n')
    with pytest.raises(ConfigError, match="stages") as caught:
        load_settings(config=config, db_url=None, environ={})
    assert problem in str(caught.value)


def test_defaults_carry_the_agent_keys(tmp_path: Path) -> None:
    config = tmp_path / "orchestrator.toml"
    config.write_text(
        '[defaults]\nmax_cost_usd = 2.5\noutput = "claude-json"\nsecrets = ["A"]\n'
        '[[pipelines.default.stages]]\nname = "a"\nworker = ["true"]\n'
        '[[pipelines.default.stages]]\nname = "b"\nworker = ["true"]\n'
        'max_cost_usd = 1\noutput = "text"\nverifier_output = "codex-jsonl"\n'
    )
    settings = load_settings(config=config, db_url=None, environ={})
    a, b = settings.pipelines["default"].stages
    assert (a.max_cost_usd, a.output, a.verifier_output, a.secrets) == (
        2.5,
        "claude-json",
        "text",
        ("A",),
    )
    assert (b.max_cost_usd, b.output, b.verifier_output) == (1.0, "text", "codex-jsonl")


def test_explain_a_budget_halted_task(tmp_path: Path, migrated_url: str) -> None:
    project = make_project(tmp_path / "p", migrated_url, stages(paying(0.4), "max_cost_usd = 1.0"))
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "t1", "--title", "Costly").returncode == 0
    assert project.run("tick").returncode == 0
    data = json.loads(project.run("explain", "t1", "--json").stdout)
    assert data["halt"]["reason"] == "budget"
    assert "max_cost_usd" in data["halt"]["rule"]
    # A command that can be pasted as it is; what USD must exceed is apart.
    assert data["halt"]["resume"] == "orchestrator resume t1 --budget USD"
    assert data["halt"]["resume_note"] == "USD above the $1.2000 spent"
    assert "`orchestrator resume t1 --budget USD` makes it" in data["next_tick"]
    cost = data["cost"]
    assert cost["spent_usd"] == pytest.approx(1.2)
    assert (cost["budget_usd"], cost["budget_scope"], cost["budget_reached"]) == (
        1.0,
        "stage build",
        True,
    )
    assert cost["budget_left_usd"] == 0.0
    text = project.run("explain", "t1").stdout
    assert "cost      $1.2000 recorded; stage build budget $1.0000, $0.0000 left (reached)" in text
    assert "  resume    orchestrator resume t1 --budget USD\n" in text
    assert "            USD above the $1.2000 spent\n" in text


# review finding: a worker that leaves a FIFO at $ORCHESTRATOR_USAGE_FILE hangs
# the tick for ever (read_usage_file opens it blocking; SIGTERM does not help).
def test_a_fifo_usage_file_does_not_hang_the_tick(tmp_path: Path, template_db: Path) -> None:
    import os
    import signal
    import subprocess

    worker = json.dumps(
        ["sh", "-c", 'mkfifo "$ORCHESTRATOR_USAGE_FILE"; echo \'{"pass": true, "score": 1}\'']
    )
    project = make_project(
        tmp_path / "p", copy_database(template_db, tmp_path / "o.db"), stages(worker)
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "t1", "--title", "Fifo").returncode == 0
    proc = project.popen("tick")
    try:
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the tick hung reading a FIFO left at $ORCHESTRATOR_USAGE_FILE")
    assert proc.returncode == 0
    assert project.state("t1") == "complete"


# review finding: `add --budget nan|inf` is accepted (click's FloatRange lets NaN
# and inf through). On PostgreSQL a NaN budget replaces the stage's limit and is
# never reached (`spent >= nan` is false): the task spends without bound; an inf
# budget makes `explain/show/list --json` print `Infinity`, which is not JSON.
@pytest.mark.parametrize("amount", ["nan", "inf"])
def test_add_refuses_a_budget_that_is_not_a_finite_number(
    tmp_path: Path, migrated_url: str, amount: str
) -> None:
    project = make_project(tmp_path / "p", migrated_url, stages(paying(0.5), "max_cost_usd = 1.0"))
    assert project.run("db", "upgrade").returncode == 0
    added = project.run("add", "t1", "--title", "Unbounded", "--budget", amount)
    if added.returncode == 0:
        for _ in range(4):
            assert project.run("tick").returncode == 0
        # the stage's $1 limit must still hold, and the JSON must be JSON
        assert halt_reason(project, "t1") == ("halted", "budget")
        json.loads(project.run("explain", "t1", "--json").stdout)
        json.loads(project.run("list", "--json").stdout)


# review finding: a usage report's counts are taken as any finite number, but
# the columns are INTEGER (int4 on PostgreSQL): `input_tokens` of 3e9 (PG) or
# 1e300 (both) makes every attempt unrecordable ("could not be recorded"), so
# a passing verdict is lost and the task crashes attempt after attempt.
@pytest.mark.parametrize("tokens", ["3000000000", "1e300"])
def test_a_huge_token_count_does_not_stop_the_attempt_being_recorded(
    tmp_path: Path, migrated_url: str, tokens: str
) -> None:
    script = (
        f'printf \'{{"input_tokens": {tokens}, "duration_ms": {tokens}}}\' '
        '> "$ORCHESTRATOR_USAGE_FILE"; echo \'{"pass": true, "score": 1}\''
    )
    project = make_project(tmp_path / "p", migrated_url, stages(json.dumps(["sh", "-c", script])))
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "t1", "--title", "Huge").returncode == 0
    done = project.run("tick")
    assert "could not be recorded" not in done.stderr, done.stderr
    assert project.state("t1") == "complete"


# review finding: the reported `session_id` is stored as it came (only cut to
# 255 characters), not cleaned as verdict strings are: a NUL (PostgreSQL text
# refuses it) or a lone surrogate (cannot be encoded) makes the attempt
# unrecordable, for ever.
@pytest.mark.parametrize("session", ["a\\u0000b", "a\\ud800b"])
def test_a_hostile_session_id_does_not_stop_the_attempt_being_recorded(
    tmp_path: Path, migrated_url: str, session: str
) -> None:
    (tmp_path / "usage.json").write_text(f'{{"session_id": "{session}"}}')
    script = (
        f'cp {tmp_path / "usage.json"} "$ORCHESTRATOR_USAGE_FILE"; '
        'echo \'{"pass": true, "score": 1}\''
    )
    project = make_project(tmp_path / "p", migrated_url, stages(json.dumps(["sh", "-c", script])))
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "t1", "--title", "Session").returncode == 0
    done = project.run("tick")
    assert "could not be recorded" not in done.stderr, done.stderr
    assert project.state("t1") == "complete"


# review finding: usage is read only when the tick records the attempt; an
# attempt the next tick recovers (its tick killed, the host rebooted) records
# no cost although its usage file is in its state folder, so what it spent
# never counts toward the budget.
def test_a_recovered_attempt_records_what_it_spent(tmp_path: Path, migrated_url: str) -> None:
    import os
    import signal
    import time

    script = (
        'printf \'{"cost_usd": 0.6}\' > "$ORCHESTRATOR_USAGE_FILE"; touch reported; '
        '[ {attempt} -gt 1 ] || sleep 30; echo \'{"pass": false, "score": 0.1}\''
    )
    project = make_project(
        tmp_path / "p",
        migrated_url,
        stages(json.dumps(["sh", "-c", script]), "max_cost_usd = 1.0"),
        lease_seconds=2,
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "t1", "--title", "Crash").returncode == 0
    tick = project.popen("tick")
    reported = tmp_path / "p" / "tasks" / "t1" / "reported"
    deadline = time.monotonic() + 30
    while not reported.exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # polling for the file the worker writes
    os.killpg(tick.pid, signal.SIGKILL)
    tick.communicate()
    # The lease runs out, by SQL rather than by waiting for the clock.
    from sqlalchemy import create_engine, text

    engine = create_engine(project.db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE attempts SET lease_expires_at = started_at"))
    engine.dispose()
    assert project.run("tick").returncode == 0
    rows = project.query("SELECT outcome, cost_usd FROM attempts ORDER BY id")
    assert rows[0][0] == "crashed"
    assert rows[0][1] == pytest.approx(0.6)


def envelope_worker(folder: Path, padding: int, cost: float = 3.0) -> str:
    """A Claude-like worker whose one result envelope (a single line) is
    `padding` bytes longer than its verdict, and says it cost `cost`."""
    script = folder / "claude_like.py"
    script.write_text(
        "import json, sys\n"
        "sys.stdout.write('starting\\n' * 10_000)\n"
        f"print(json.dumps({{'type': 'result', 'subtype': 'success', 'is_error': False,"
        f" 'total_cost_usd': {cost}, 'num_turns': 4,"
        f" 'result': '{{\"pass\": false, \"score\": 0.1}}', 'log': 'x' * {padding}}}))\n"
    )
    return json.dumps([sys.executable, str(script)])


# Issue 22, item 8: an envelope longer than `output_cap_bytes` was cut by the
# head+tail capture; the attempt became a `worker_error` that cost nothing,
# so a $1 budget let through one $3 attempt after another.
def test_an_envelope_longer_than_the_output_cap_is_read_whole(
    tmp_path: Path, migrated_url: str
) -> None:
    worker = envelope_worker(tmp_path, 300_000)
    project = make_project(
        tmp_path / "p",
        migrated_url,
        stages(worker, 'output = "claude-json"\nmax_cost_usd = 1.0'),
        output_cap_bytes=65536,
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "t1", "--title", "Big").returncode == 0
    done = project.run("tick")
    assert done.returncode == 0, done.stderr
    rows = project.query("SELECT outcome, cost_usd, turns, error FROM attempts")
    assert rows == [("failed", 3.0, 4, None)]  # one attempt: its cost reached the budget
    assert halt_reason(project, "t1") == ("halted", "budget")
    kept = (tmp_path / "p" / "state" / "t1" / "build-001" / "worker.out").read_text()
    assert "bytes omitted" in kept and kept.rstrip().endswith("x" * 1000 + '"}')


def test_an_unknown_cost_halts_a_budgeted_task_until_resumed(
    tmp_path: Path, migrated_url: str
) -> None:
    # Past the last line's hard bound (8 MiB) the envelope is cut after all:
    # its cost is unknown, which is a question for a person, not $0.
    worker = envelope_worker(tmp_path, 9 * 1024 * 1024)
    project = make_project(
        tmp_path / "p", migrated_url, stages(worker, 'output = "claude-json"\nmax_cost_usd = 1.0')
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "t1", "--title", "Huge").returncode == 0
    done = project.run("tick")
    assert done.returncode == 0, done.stderr
    rows = project.query("SELECT outcome, cost_usd FROM attempts")
    assert rows == [("worker_error", None)]
    assert halt_reason(project, "t1") == ("halted", "budget")
    assert "attempt 1 reported no cost" in done.stdout, done.stdout
    [(reason,)] = project.query("SELECT reason FROM transitions WHERE event = 'halt'")
    assert "attempt 1 reported no cost" in reason
    # A resume answers the question: the task goes on, and the next unknown
    # cost asks again.
    assert project.run("resume", "t1").returncode == 0
    assert project.run("tick").returncode == 0
    assert len(project.query("SELECT id FROM attempts")) == 2
    assert halt_reason(project, "t1") == ("halted", "budget")


SELF_REPORTING = """\
import json, os, sys
verdict = json.dumps({"pass": False, "score": 0.1})
with open(os.environ["ORCHESTRATOR_USAGE_FILE"], "w") as report:
    report.write(json.dumps({"cost_usd": 0.0, "input_tokens": 1, "output_tokens": 1}))
if sys.argv[1] == "claude":
    envelope = {"type": "result", "result": verdict, "usage": {"input_tokens": 900}}
    if sys.argv[2] != "-":
        envelope["total_cost_usd"] = float(sys.argv[2])
    print(json.dumps(envelope))
else:
    print(json.dumps({"type": "thread.started", "thread_id": "th-1"}))
    item = {"type": "agent_message", "text": verdict}
    print(json.dumps({"type": "item.completed", "item": item}))
    usage = {"input_tokens": 900, "output_tokens": 80}
    print(json.dumps({"type": "turn.completed", "usage": usage}))
"""


@pytest.mark.parametrize(
    ("kind", "cost", "recorded"),
    [
        ("claude", "0.8", (0.8, 900, None)),
        ("claude", "-", (None, 900, None)),  # the envelope says no cost: unknown, not $0
        ("codex", "-", (0.0, 900, 80)),  # Codex's events carry tokens, not dollars
    ],
)
def test_the_agents_own_output_is_charged_not_the_usage_file_it_writes(
    tmp_path: Path, migrated_url: str, kind: str, cost: str, recorded: tuple[object, ...]
) -> None:
    """The worker is the agent, and it can write $ORCHESTRATOR_USAGE_FILE:
    where the agent's output carries a figure (Claude Code's envelope: its
    cost and tokens; Codex's events: its tokens), that figure is recorded
    and charged, and the file's claim is not read for it. An envelope with
    no cost is an unknown cost, which halts a budgeted task."""
    script = tmp_path / "agent.py"
    script.write_text(SELF_REPORTING)
    fmt = "claude-json" if kind == "claude" else "codex-jsonl"
    worker = json.dumps([sys.executable, str(script), kind, cost])
    project = make_project(
        tmp_path / "p", migrated_url, stages(worker, f'output = "{fmt}"\nmax_cost_usd = 1.0')
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "t1", "--title", "Self-reporting").returncode == 0
    done = project.run("tick", "--max-tasks", "1")
    assert done.returncode == 0, done.stderr
    [row] = project.query("SELECT cost_usd, input_tokens, output_tokens FROM attempts")
    assert row == pytest.approx(recorded), row
    if recorded[0] is None:
        assert project.run("tick").returncode == 0
        assert halt_reason(project, "t1") == ("halted", "budget")
        assert len(project.query("SELECT id FROM attempts")) == 1
