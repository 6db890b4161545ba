"""The read side: list, show, history, scores and sql, as JSON and CSV (the
contract that people script against), on both backends."""

from __future__ import annotations

import csv
import io
import itertools
import json
from datetime import datetime
from typing import Any

from support import Project, check_invariants, cli_json

TRICKY = 'Fix "quotes", commas,\nand a newline — ünïcode'

LIST_KEYS = {"slug", "title", "pipeline", "state", "stage", "status", "attempt", "score"}
TRANSITION_KEYS = {"from_state", "to_state", "actor", "reason", "note", "at"}
ATTEMPT_KEYS = {
    "stage",
    "number",
    "outcome",
    "pass",
    "score",
    "reasons",
    "next_hint",
    "started_at",
    "finished_at",
}


def run(project: Project, *args: str) -> Any:
    result = project.cli(*args)
    assert result.exit_code == 0, (args, result.exit_code, result.stdout, result.stderr)
    return result


def populated(project: Project) -> Project:
    """t1 waits at the gate; t2 is halted; t3 was rejected once, then approved
    and completed; t4 has not run yet."""
    run(project, "add", "t1", "--title", TRICKY)
    run(project, "add", "t2", "--title", "second")
    run(project, "add", "t3", "--title", "third")
    run(project, "tick")
    run(project, "halt", "t2", "--by", "hal")
    run(project, "reject", "t3", "--note", "try harder", "--by", "rita")
    run(project, "tick")
    run(project, "approve", "t3", "--by", "abe")
    run(project, "tick")
    run(project, "add", "t4", "--title", "fourth")
    assert check_invariants(project.db_url, allow_running=False) == []
    return project


def csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def aware(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    assert parsed.tzinfo is not None, value
    return parsed


def test_list_json(project: Project) -> None:
    rows = cli_json(populated(project).cli("list", "--json"))
    assert [r["slug"] for r in rows] == ["t1", "t2", "t3", "t4"]
    for row in rows:
        assert LIST_KEYS | {"halt_reason"} <= set(row), row
    by = {r["slug"]: r for r in rows}
    assert by["t1"]["title"] == TRICKY
    picked = {
        slug: (r["state"], r["stage"], r["status"], r["attempt"], r["score"], r["halt_reason"])
        for slug, r in by.items()
    }
    assert picked == {
        "t1": ("research:awaiting_approval", "research", "awaiting_approval", 1, 0.9, None),
        "t2": ("research:halted", "research", "halted", 1, 0.9, "manual"),
        "t3": ("complete", "complete", "complete", 0, None, None),
        "t4": ("research", "research", "ready", 0, None, None),
    }
    assert all(r["pipeline"] == "default" for r in rows)


FILTERS = {
    "research:awaiting_approval": ["t1"],
    "awaiting_approval": ["t1"],
    "halted": ["t2"],
    "research:halted": ["t2"],
    "research": ["t4"],
    "ready": ["t4"],  # a bare status matches at any stage
    "complete": ["t3"],
    "implement": [],
    "implement:halted": [],
    "research:approved": [],
}


def test_list_state_filter(project: Project) -> None:
    populated(project)
    for state, expected in FILTERS.items():
        rows = cli_json(project.cli("list", "--state", state, "--json"))
        assert [r["slug"] for r in rows] == expected, state
        assert all(r["state"] == rows[0]["state"] for r in rows)
    table = run(project, "list", "--state", "halted").stdout.splitlines()
    assert len(table) == 2
    assert table[1].startswith("t2 ")


def test_list_state_filter_refuses_nonsense(project: Project) -> None:
    for state in ("research:bogus", "research:ready", ":halted"):
        result = project.cli("list", "--state", state)
        assert result.exit_code == 1, (state, result.output)
        assert result.stderr.startswith("Error: invalid state")


def test_list_csv_and_table(project: Project) -> None:
    populated(project)
    rows = csv_rows(run(project, "list", "--csv").stdout)
    assert [r["slug"] for r in rows] == ["t1", "t2", "t3", "t4"]
    assert rows[0]["title"] == TRICKY
    assert rows[1]["halt_reason"] == "manual"
    table = run(project, "list").stdout.splitlines()
    assert table[0].split()[:3] == ["slug", "state", "attempt"]
    assert len(table) == 5  # a newline in a title does not break the table


def test_show_json(project: Project) -> None:
    data = cli_json(populated(project).cli("show", "t3", "--json"))
    assert (data["slug"], data["state"], data["title"]) == ("t3", "complete", "third")
    transitions = data["transitions"]
    for t in transitions:
        assert set(t) >= TRANSITION_KEYS, t
    assert [t["seq"] for t in transitions] == list(range(1, len(transitions) + 1))
    assert transitions[0]["from_state"] is None
    assert transitions[-1]["to_state"] == "complete"
    for earlier, later in itertools.pairwise(transitions):
        assert later["from_state"] == earlier["to_state"]
        assert aware(earlier["at"]) <= aware(later["at"])
    events = [(t["event"], t["actor"], t["note"]) for t in transitions]
    assert ("reject", "rita", "try harder") in events
    assert ("approve", "abe", None) in events

    attempts = data["attempts"]
    for a in attempts:
        assert set(a) >= ATTEMPT_KEYS, a
        assert aware(a["started_at"]) <= aware(a["finished_at"])
        assert isinstance(a["reasons"], list)
    assert [(a["stage"], a["number"], a["outcome"], a["pass"], a["score"]) for a in attempts] == [
        ("research", 1, "passed", True, 0.9),
        ("research", 2, "passed", True, 0.9),
        ("implement", 1, "passed", True, 1.0),
    ]

    halted = cli_json(project.cli("show", "t2", "--json"))
    assert (halted["state"], halted["halt_reason"]) == ("research:halted", "manual")
    fresh = cli_json(project.cli("show", "t4", "--json"))
    assert (fresh["attempts"], len(fresh["transitions"])) == ([], 1)

    waiting = cli_json(project.cli("show", "t1", "--json"))
    assert (waiting["attempt"], waiting["score"], waiting["title"]) == (1, 0.9, TRICKY)

    text = run(project, "show", "t1").stdout
    assert "research:awaiting_approval" in text
    assert "transitions:" in text


def test_scores(project: Project) -> None:
    populated(project)
    rows = cli_json(project.cli("scores", "t3", "--json"))
    keys = {"stage", "attempt", "run", "score", "pass", "outcome", "cost_usd", "at"}
    assert all(set(r) == keys for r in rows), rows
    assert [(r["stage"], r["attempt"], r["score"], r["pass"], r["outcome"]) for r in rows] == [
        ("research", 1, 0.9, True, "passed"),
        ("research", 2, 0.9, True, "passed"),
        ("implement", 1, 1.0, True, "passed"),
    ]
    assert [r["run"] for r in rows] == [1, 2, 3], rows  # rejected: a new run; the next stage's
    for row in rows:
        aware(row["at"])
    research = cli_json(project.cli("scores", "t3", "--stage", "research", "--json"))
    assert [r["attempt"] for r in research] == [1, 2]
    assert cli_json(project.cli("scores", "t4", "--json")) == []
    parsed = csv_rows(run(project, "scores", "t3", "--csv").stdout)
    assert [(r["stage"], r["attempt"], float(r["score"])) for r in parsed] == [
        ("research", "1", 0.9),
        ("research", "2", 0.9),
        ("implement", "1", 1.0),
    ]
    assert project.cli("scores", "nope").exit_code == 1


def test_history(project: Project) -> None:
    populated(project)
    everything = cli_json(project.cli("history", "--json"))
    total = project.counts()["transitions"]
    assert len(everything) == total
    assert {r["task"] for r in everything} == {"t1", "t2", "t3", "t4"}
    mine = cli_json(project.cli("history", "t2", "--json"))
    assert [(r["seq"], r["event"]) for r in mine] == [
        (1, "add"),
        (2, "claim"),
        (3, "await_approval"),
        (4, "halt"),
    ]
    assert mine[-1]["actor"] == "hal"
    parsed = csv_rows(run(project, "history", "--csv").stdout)
    assert len(parsed) == total
    assert set(parsed[0]) >= {"task", "seq", "at", "from_state", "to_state", "actor"}
    assert len(cli_json(project.cli("history", "--limit", "2", "--json"))) == 2
    result = project.cli("history", "nope")
    assert (result.exit_code, result.stderr) == (1, "Error: no task 'nope'\n")


def test_sql_json_and_csv(project: Project) -> None:
    populated(project)
    rows = cli_json(project.cli("sql", "SELECT slug, title FROM tasks ORDER BY id", "--json"))
    assert rows[0] == {"slug": "t1", "title": TRICKY}
    assert len(rows) == 4
    parsed = csv_rows(
        run(project, "sql", "SELECT slug, title FROM tasks ORDER BY id", "--csv").stdout
    )
    assert parsed == [{"slug": r["slug"], "title": r["title"]} for r in rows]
    states = cli_json(
        project.cli("sql", "SELECT task, state FROM task_states ORDER BY task_id", "--json")
    )
    listed = cli_json(project.cli("list", "--json"))
    assert [(r["task"], r["state"]) for r in states] == [(r["slug"], r["state"]) for r in listed]
    percent = cli_json(project.cli("sql", "SELECT 'a%' AS x, count(*) AS n FROM tasks", "--json"))
    assert percent == [{"x": "a%", "n": 4}]
    assert cli_json(project.cli("sql", "SELECT slug FROM tasks WHERE 1 = 0", "--json")) == []
    bad = project.cli("sql", "SELECT nope FROM nowhere")
    assert bad.exit_code == 1
    assert bad.stderr.startswith("Error: query failed")


WRITES = [
    "INSERT INTO ticks (host, pid, started_at, claimed, recovered, advanced) "
    "VALUES ('h', 1, '2020-01-01', 0, 0, 0)",
    "UPDATE tasks SET title = 'changed'",
    "DELETE FROM transitions",
    "DROP TABLE ticks",
    "DROP VIEW timeline",
    "CREATE TABLE extra (a integer)",
    "COMMIT; DELETE FROM transitions",
    "ROLLBACK; UPDATE tasks SET title = 'changed'",
    "END; DROP VIEW timeline",
]


def test_sql_refuses_writes(project: Project) -> None:
    populated(project)

    def snapshot() -> Any:
        return (
            project.counts(),
            project.query("SELECT slug, title, stage, status FROM tasks ORDER BY id"),
            project.query("SELECT count(*) FROM timeline"),
        )

    before = snapshot()
    for statement in WRITES:
        result = project.cli("sql", statement)
        assert result.exit_code == 1, (statement, result.output)
        assert result.stderr.startswith("Error: "), result.stderr
        assert len(result.stderr.splitlines()) == 1
        assert snapshot() == before, statement
    assert project.cli("sql", "SELECT * FROM extra").exit_code == 1  # never created
    assert cli_json(project.cli("sql", "SELECT 1 AS one", "--json")) == [{"one": 1}]
    assert check_invariants(project.db_url) == []


def test_unknown_task_in_show_and_scores(project: Project) -> None:
    for args in (("show", "nope"), ("show", "nope", "--json"), ("scores", "nope", "--json")):
        result = project.cli(*args)
        assert (result.exit_code, result.stdout) == (1, "")
        assert result.stderr == "Error: no task 'nope'\n"


def test_json_is_valid_utf8_without_escapes(project: Project) -> None:
    run(project, "add", "u1", "--title", "ünï ✓")
    out = run(project, "list", "--json").stdout
    assert "ünï ✓" in out
    assert json.loads(out)[0]["title"] == "ünï ✓"


def test_sql_with_a_missing_table_is_the_query_s_fault(project: Project) -> None:
    result = project.cli("sql", "SELECT * FROM no_such_table")
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("Error: query failed:")
