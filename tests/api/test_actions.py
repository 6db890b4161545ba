"""The human commands (add, approve, reject, halt, resume, cancel) through the
CLI, on SQLite and PostgreSQL.

Every command is followed by `check_invariants` (state == newest to_state,
contiguous seq, legal edges), and every refusal by a row count of the four
tables: a refused command changes nothing.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from click.testing import Result
from support import Project, check_invariants, cli_json

from orchestrator.storage import repo

NOTHING_WRITTEN = "refused command wrote rows"
REFUSAL = re.compile(
    r"^Error: cannot (approve|reject|halt|resume|cancel) '[^']+': it is at `\S+` \("
)

TWO_GATES = """
[[pipelines.default.stages]]
name = "research"
gate = true
worker = ["true"]
verifier = ["sh", "-c", "echo '{\\"pass\\": true, \\"score\\": 0.9}'"]

[[pipelines.default.stages]]
name = "review"
gate = true
worker = ["true"]
verifier = ["sh", "-c", "echo '{\\"pass\\": false, \\"score\\": 0.2}'"]
max_attempts = 50
"""

BOTH_GATES_PASS = TWO_GATES.replace('\\"pass\\": false', '\\"pass\\": true')


def ok(project: Project, *args: str, input: str | None = None) -> Result:
    """Run a command that must succeed; the invariants must hold afterwards."""
    result = project.cli(*args, input=input)
    assert result.exit_code == 0, (args, result.exit_code, result.stdout, result.stderr)
    assert check_invariants(project.db_url) == []
    return result


def refused(
    project: Project, *args: str, match: str, code: int = 1, input: str | None = None
) -> Result:
    """Run a command that must be refused: exit `code`, one `Error:` line, no rows written."""
    before = project.counts()
    result = project.cli(*args, input=input)
    assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
    assert project.counts() == before, NOTHING_WRITTEN
    assert check_invariants(project.db_url) == []
    assert "Traceback" not in result.output
    if code == 1:
        lines = result.stderr.splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith("Error: "), lines
    assert re.search(match, result.stderr), (match, result.stderr)
    return result


def transitions(project: Project, slug: str) -> list[tuple[object, ...]]:
    return project.query(
        "SELECT tr.seq, tr.from_state, tr.to_state, tr.event, tr.actor, tr.note "
        "FROM transitions tr JOIN tasks t ON t.id = tr.task_id "
        "WHERE t.slug = :s ORDER BY tr.seq",
        s=slug,
    )


def gated(project: Project, *slugs: str) -> None:
    """Add tasks and tick them to research:awaiting_approval."""
    for slug in slugs:
        ok(project, "add", slug, "--title", f"task {slug}")
    ok(project, "tick")
    for slug in slugs:
        assert project.state(slug) == "research:awaiting_approval"


# -- add -----------------------------------------------------------------------


def test_add_creates_a_task_at_the_first_stage(project: Project) -> None:
    ok(project, "add", "t1", "--title", "First", "--priority", "5", "--body", "the body")
    assert project.state("t1") == "research"
    [(title, body, pipeline, priority, version)] = project.query(
        "SELECT title, body, pipeline, priority, version FROM tasks WHERE slug = 't1'"
    )
    assert (title, body, pipeline, priority, version) == ("First", "the body", "default", 5, 1)
    [(seq, before, after, event, _actor, note)] = transitions(project, "t1")
    assert (seq, before, after, event, note) == (1, None, "research", "add", None)
    assert project.counts() == {"tasks": 1, "attempts": 0, "transitions": 1, "ticks": 0}


def test_add_body_file(project: Project, tmp_path: Path) -> None:
    body = tmp_path / "body.md"
    body.write_text("line one\nline two\n", encoding="utf-8")
    ok(project, "add", "t1", "--title", "T", "--body-file", str(body))
    assert project.query("SELECT body FROM tasks")[0][0] == "line one\nline two\n"


BAD_SLUGS = ["../x", "a/b", "-rf", "Ａ", "a" * 64, "", "a..b", "..", ".", "A", "a b", "a\x00b", "é"]


def test_add_refuses_bad_slugs(project: Project) -> None:
    for slug in BAD_SLUGS:
        # `--` so click hands `-rf` to us as the slug, not as an option.
        refused(project, "add", "--title", "T", "--", slug, match=r"invalid slug")
    assert project.counts()["tasks"] == 0


def test_add_accepts_the_edges_of_the_slug_rule(project: Project) -> None:
    for slug in ("a", "0", "a" * 63, "a.b_c-d", "x-"):
        ok(project, "add", slug, "--title", "T")
    assert project.counts()["tasks"] == 5


def test_add_refuses_duplicates_and_unknown_pipelines(project: Project) -> None:
    ok(project, "add", "t1", "--title", "T")
    refused(project, "add", "t1", "--title", "again", match=r"'t1' already exists")
    refused(
        project,
        "add",
        "t2",
        "--title",
        "T",
        "--pipeline",
        "nope",
        match=r"unknown pipeline 'nope' \(known: default\)",
    )
    refused(project, "add", "t2", "--title", "   ", match=r"non-empty title")


def test_add_duplicate_lost_race_is_a_refusal(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `add`s of one slug at once (PostgreSQL does not serialise them):
    the loser's unique violation is a refusal, not a traceback."""
    ok(project, "add", "t1", "--title", "T")
    monkeypatch.setattr(repo, "existing_slugs", lambda conn, slugs: set())
    refused(project, "add", "t1", "--title", "again", match=r"'t1' already exists")


def test_add_from_file_is_one_transaction(project: Project, tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    lines = [
        {"slug": "a1", "title": "A one"},
        {"slug": "a2", "title": "A two", "priority": 3, "body": "b"},
        {"slug": "a3", "title": "A three", "pipeline": "default"},
    ]
    good.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n", encoding="utf-8")
    result = ok(project, "add", "--from", str(good))
    assert "added 3 tasks" in result.stdout
    assert project.query("SELECT slug, priority FROM tasks ORDER BY id") == [
        ("a1", 0),
        ("a2", 3),
        ("a3", 0),
    ]

    first = json.dumps({"slug": "b1", "title": "fine"})
    bad_lines = {
        "bad slug": (json.dumps({"slug": "../b", "title": "x"}), r"invalid slug"),
        "exists": (json.dumps({"slug": "a1", "title": "x"}), r"'a1' already exists"),
        "twice": (first, r"'b1' appears twice"),
        "not json": ("{nope", r"line 2"),
        "not an object": ("[1, 2]", r"line 2: not an object"),
        "unknown field": (json.dumps({"slug": "b2", "title": "x", "x": 1}), r"unknown field"),
        "missing title": (json.dumps({"slug": "b2"}), r"line 2"),
        "title not a string": (json.dumps({"slug": "b2", "title": 5}), r"must be strings"),
        "pipeline not a string": (
            json.dumps({"slug": "b2", "title": "x", "pipeline": ["default"]}),
            r"pipeline",
        ),
        "bad pipeline": (json.dumps({"slug": "b2", "title": "x", "pipeline": "p"}), "pipeline"),
        "priority not an int": (
            json.dumps({"slug": "b2", "title": "x", "priority": "1"}),
            r"priority must be an integer",
        ),
    }
    for name, (line, match) in bad_lines.items():
        path = tmp_path / f"bad-{name.replace(' ', '-')}.jsonl"
        path.write_text(first + "\n" + line + "\n", encoding="utf-8")
        refused(project, "add", "--from", str(path), match=match)
    assert project.counts()["tasks"] == 3

    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    refused(project, "add", "--from", str(empty), match=r"holds no tasks")

    ok(project, "add", "--from", "-", input=first + "\n")
    assert project.state("b1") == "research"


# -- approve -----------------------------------------------------------------------


def test_approve_opens_the_gate_once(project: Project) -> None:
    gated(project, "t1", "t2")
    result = ok(project, "approve", "t1", "--by", "alice", "--note", "looks right")
    assert "approved research" in result.stdout
    assert project.state("t1") == "research:approved"
    last = transitions(project, "t1")[-1]
    assert last[1:] == (
        "research:awaiting_approval",
        "research:approved",
        "approve",
        "alice",
        "looks right",
    )

    before = project.counts()
    again = ok(project, "approve", "t1", "--by", "bob")
    assert "already approved" in again.stdout
    assert project.counts() == before
    assert transitions(project, "t1")[-1][4] == "alice"

    refused(project, "approve", "nope", match=r"^Error: no task 'nope'")
    ok(project, "halt", "t2")
    refused(
        project,
        "approve",
        "t2",
        match=r"cannot approve 't2': it is at `research:halted` \(halted, manual\)",
    )


def test_approve_only_from_awaiting_approval(project: Project) -> None:
    ok(project, "add", "t1", "--title", "T")
    refused(
        project,
        "approve",
        "t1",
        match=r"cannot approve 't1': it is at `research` \(ready\); "
        r"approve needs `:awaiting_approval`$",
    )
    gated(project, "t2")
    ok(project, "approve", "t2")
    ok(project, "tick")  # implement runs and passes: complete
    assert project.state("t2") == "complete"
    refused(project, "approve", "t2", match=r"cannot approve 't2': it is at `complete`")


def test_an_earlier_approval_does_not_count_for_a_later_gate(project: Project) -> None:
    """A second gate that is not waiting yet must not answer "already approved"
    because the first gate was approved: the person would think it worked."""
    project.write_config(TWO_GATES, retry_interval=3600)  # one attempt per tick
    gated(project, "t1")
    ok(project, "approve", "t1")
    ok(project, "tick")  # review runs once and fails: back to ready at review
    assert project.state("t1") == "review"
    refused(project, "approve", "t1", match=r"cannot approve 't1': it is at `review` \(ready\)")


# -- reject ------------------------------------------------------------------------


def test_reject_sends_the_gate_back_with_the_note_as_hint(project: Project) -> None:
    gated(project, "t1")
    ok(project, "reject", "t1", "--note", "cite sources", "--by", "carol")
    assert project.state("t1") == "research"
    assert project.query("SELECT next_hint, hint_source, run FROM tasks") == [
        ("cite sources", "reject", 2)
    ]
    last = transitions(project, "t1")[-1]
    assert last[1:] == ("research:awaiting_approval", "research", "reject", "carol", "cite sources")
    ok(project, "tick")
    assert project.query("SELECT number, hint FROM attempts ORDER BY id")[-1] == (2, "cite sources")

    refused(project, "reject", "t1", "--note", "", match=r"needs a --note")
    refused(project, "reject", "t1", match=r"Missing option '--note'", code=2)
    ok(project, "approve", "t1")
    refused(
        project, "reject", "t1", "--note", "x", match=r"cannot reject 't1': it is at `research:app"
    )
    refused(project, "reject", "zz", "--note", "x", match=r"no task 'zz'")


# -- halt, resume, cancel -------------------------------------------------------------


def test_halt_resume_cancel(project: Project) -> None:
    ok(project, "add", "t1", "--title", "T")
    ok(project, "halt", "t1", "--by", "dan", "--note", "wait for the API")
    assert project.state("t1") == "research:halted"
    assert project.query("SELECT halt_reason FROM tasks") == [("manual",)]
    refused(
        project,
        "halt",
        "t1",
        match=r"cannot halt 't1': it is at `research:halted` \(halted, manual\)",
    )
    ok(project, "resume", "t1", "--by", "erin")
    assert project.state("t1") == "research"
    assert project.query("SELECT halt_reason, run FROM tasks") == [(None, 2)]
    refused(
        project,
        "resume",
        "t1",
        match=r"cannot resume 't1': it is at `research` \(ready\); resume needs `:halted`$",
    )

    ok(project, "tick")
    ok(project, "halt", "t1")  # from awaiting_approval
    ok(project, "cancel", "t1", "--by", "fay")  # from halted
    assert project.state("t1") == "research:cancelled"
    for verb in ("halt", "resume", "cancel", "approve"):
        refused(project, verb, "t1", match=rf"cannot {verb} 't1': it is at `research:cancelled`")
    refused(project, "reject", "t1", "--note", "n", match=r"it is at `research:cancelled`")

    actors = [(row[3], row[4]) for row in transitions(project, "t1")]
    assert ("halt", "dan") in actors
    assert ("resume", "erin") in actors
    assert actors[-1] == ("cancel", "fay")
    assert transitions(project, "t1")[1][5] == "wait for the API"

    gated(project, "t2")
    ok(project, "approve", "t2")
    ok(project, "halt", "t2")  # from approved
    gated(project, "t3")
    ok(project, "cancel", "t3")  # from awaiting_approval
    ok(project, "add", "t4", "--title", "T")
    ok(project, "cancel", "t4")  # from ready
    assert [project.state(s) for s in ("t2", "t3", "t4")] == [
        "research:halted",
        "research:cancelled",
        "research:cancelled",
    ]
    for verb in ("halt", "resume", "cancel"):
        refused(project, verb, "nope", match=r"no task 'nope'")


def test_complete_is_terminal(project: Project) -> None:
    gated(project, "t1")
    ok(project, "approve", "t1")
    ok(project, "tick")
    assert project.state("t1") == "complete"
    for verb in ("halt", "resume", "cancel"):
        refused(project, verb, "t1", match=rf"cannot {verb} 't1': it is at `complete`")


def test_default_actor_is_the_login_name(project: Project) -> None:
    ok(project, "add", "t1", "--title", "T")
    ok(project, "halt", "t1")
    actor = transitions(project, "t1")[-1][4]
    assert isinstance(actor, str)
    assert actor
    assert actor != "tick"


def test_human_commands_refuse_inside_an_attempt(project: Project) -> None:
    gated(project, "t1")
    project.env["ORCHESTRATOR_TASK"] = "t1"
    for args in (
        ("approve", "t1"),
        ("reject", "t1", "--note", "n"),
        ("halt", "t1"),
        ("resume", "t1"),
        ("cancel", "t1"),
    ):
        refused(project, *args, match=r"ORCHESTRATOR_TASK is set")
    del project.env["ORCHESTRATOR_TASK"]
    assert project.state("t1") == "research:awaiting_approval"
    ok(project, "approve", "t1")


def test_every_refusal_type_changes_nothing(project: Project) -> None:
    """One place listing each kind of refusal (the checks run inside `refused`)."""
    gated(project, "t1")
    ok(project, "add", "t2", "--title", "T")
    cases: list[tuple[tuple[str, ...], str]] = [
        (("add", "--title", "T", "--", "../x"), r"invalid slug"),
        (("add", "t1", "--title", "T"), r"already exists"),
        (("add", "t3", "--title", "T", "--pipeline", "p"), r"unknown pipeline"),
        (("approve", "nope"), r"no task"),
        (("approve", "t2"), r"cannot approve"),
        (("resume", "t1"), r"cannot resume"),
        (("reject", "t1", "--note", " "), r"needs a --note"),
        (("sql", "DELETE FROM transitions"), r"read-only"),
        (("show", "nope"), r"no task"),
    ]
    for args, match in cases:
        refused(project, *args, match=match)
    project.env["ORCHESTRATOR_TASK"] = "t1"
    refused(project, "approve", "t1", match=r"ORCHESTRATOR_TASK")


# -- many processes at once -----------------------------------------------------------


def test_concurrent_human_commands(project: Project, backend: str) -> None:
    """8 real processes per round issue approve/reject/halt/resume against the
    same tasks. Nobody sees `database is locked`; every exit is 0, or 1 for a
    "cannot ... it is ..." refusal; the transitions added equal the commands
    that reported a change."""
    project.write_config(BOTH_GATES_PASS)
    slugs = ["c1", "c2", "c3"]
    gated(project, *slugs)
    rng = random.Random(1234)
    commands = [
        ("approve",),
        ("approve",),
        ("reject", "--note", "again"),
        ("halt",),
        ("resume",),
    ]
    total_changes = 0
    for _round in range(3 if backend == "sqlite" else 2):
        before = project.counts()["transitions"]
        picks = [(rng.choice(commands), rng.choice(slugs)) for _ in range(8)]
        procs = [project.popen(cmd[0], slug, *cmd[1:]) for cmd, slug in picks]
        changes = 0
        for proc, (cmd, slug) in zip(procs, picks, strict=True):
            out, err = proc.communicate(timeout=120)
            assert "database is locked" not in err
            assert "Traceback" not in err
            assert proc.returncode in (0, 1), (cmd, slug, proc.returncode, err)
            if proc.returncode == 1:
                assert REFUSAL.match(err), err
            elif "already approved" not in out:
                changes += 1
        assert project.counts()["transitions"] - before == changes
        total_changes += changes
        assert check_invariants(project.db_url) == []
        ok(project, "tick")  # ready tasks come back to a gate for the next round
    assert total_changes > 0
    assert len(cli_json(project.cli("list", "--json"))) == 3


def test_a_wait_named_twice_is_one_wait_not_a_lost_race(project: Project) -> None:
    # The library and the MCP server's add_subtask pass `after` as given
    # (only the CLI drops repeats): a repeat is the same wait, not an
    # "already exists (added meanwhile)" refusal of a task nobody added.
    from orchestrator import Project as Face

    ok(project, "add", "a", "--title", "A")
    with Face.open(project.config, db=project.db_url) as face:
        face.add("b", "B", after=["a", "a"])
    assert project.query(
        "SELECT t.slug, o.slug FROM task_dependencies d JOIN tasks t ON t.id = d.task_id "
        "JOIN tasks o ON o.id = d.after_id"
    ) == [("b", "a")]
    assert check_invariants(project.db_url) == []
