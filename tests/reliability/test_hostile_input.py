"""Hostile slugs, workspaces, argv values, configs and verdicts.

Everything goes through real `python -m orchestrator` processes. A hostile
input is "rejected" when the command refuses it cleanly (the documented exit
status, one `Error:` line, nothing written) or, for values that are allowed
to flow (hints, titles, verdicts), when they arrive inert: one literal argv
element, no shell, no crash. An "escape" is any file created or changed
outside the place the orchestrator may write.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from e2e.e2e_support import stage
from reliability_report import HOSTILE, ProjectFactory, ReliabilityReport
from reliability_support import (
    PASS_VERDICT,
    agent,
    one_error_line,
    query,
    run,
    snapshot,
    sqlite_file,
    table_counts,
    violations,
)

pytestmark = pytest.mark.reliability

DB_FILES = ("orchestrator.db",)  # the database and its -wal/-shm: checked by counts


def escapes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    return sorted(changed)


# -- slugs -----------------------------------------------------------------------------

SLUGS = {
    "dotdot-x": "../x",
    "dotdot-etc": "../../etc",
    "absolute": "/etc/passwd",
    "climb": "a/../../b",
    "slash": "a/b",
    "fullwidth-dots": "\uff0e\uff0e",
    "fullwidth-dots-path": "\uff0e\uff0e/x",
    "nul": "a\x00b",
    "300-chars": "a" * 300,
    "dash-rf": "-rf",
    "dash-help": "--help",
    "hidden": ".hidden",
    "dot": ".",
    "dotdot": "..",
    "inner-dotdot": "a..b",
    "upper": "UPPER",
    "empty": "",
    "leading-space": " lead",
    "newline": "ok\nname",
    "rtl-override": "abc\u202etxt",
    "emoji": "task-\U0001f600",
}


@pytest.mark.lane(HOSTILE)
@pytest.mark.parametrize("slug", list(SLUGS.values()), ids=list(SLUGS))
def test_hostile_slug_is_refused(
    slug: str, new_project: ProjectFactory, report: ReliabilityReport, tmp_path: Path
) -> None:
    project = new_project()
    before_rows = table_counts(project.db_url)
    before_files = snapshot(tmp_path, ignore=[f"proj1/{n}" for n in DB_FILES])
    if "\x00" in slug:  # argv cannot carry NUL: the JSON-lines door can
        lines = tmp_path / "proj1" / "in.jsonl"
        lines.write_text(json.dumps({"slug": slug, "title": "t"}) + "\n")
        before_files = snapshot(tmp_path, ignore=[f"proj1/{n}" for n in DB_FILES])
        result = run(project, "add", "--from", str(lines))
    else:
        result = run(project, "add", "--title", "hostile", "--", slug)
    escaped = escapes(before_files, snapshot(tmp_path, ignore=[f"proj1/{n}" for n in DB_FILES]))
    report.escaped(len(escaped))
    assert result.returncode == 1, (result.returncode, result.stderr)
    line = one_error_line(result.stderr)
    assert line is not None and "slug" in line, result.stderr
    assert table_counts(project.db_url) == before_rows
    assert escaped == []


# -- a workspace that is a symlink out of the root ----------------------------------


@pytest.mark.lane(HOSTILE)
@pytest.mark.parametrize("dangling", [False, True], ids=["to-folder", "dangling"])
def test_symlinked_workspace_is_not_used(
    dangling: bool, new_project: ProjectFactory, report: ReliabilityReport, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    target = outside / "not-yet" if dangling else outside
    outside.mkdir()
    project = new_project(
        stage("work", worker=agent("--touch", "escaped.txt"), verifier=PASS_VERDICT, max_attempts=1)
    )
    (project.dir / "tasks").mkdir()
    (project.dir / "tasks" / "t1").symlink_to(target, target_is_directory=True)
    assert project.cli("add", "t1", "--title", "linked").exit_code == 0
    before = snapshot(outside)

    result = run(project, "tick")
    escaped = escapes(before, snapshot(outside)) + sorted(
        str(p) for p in tmp_path.rglob("escaped.txt")
    )
    report.escaped(len(escaped))
    assert result.returncode == 0, result.stderr
    assert escaped == []
    assert not target.exists() or not dangling
    rows = query(project.db_url, "SELECT outcome, error FROM attempts")
    assert len(rows) == 1 and rows[0][0] == "worker_error", rows
    assert "link" in rows[0][1]
    assert violations(project.db_url) == []


@pytest.mark.lane(HOSTILE)
@pytest.mark.parametrize("slug", ["../escape", "/tmp/orch-abs-escape", "a/b", "UP"])
def test_bad_slug_already_in_the_database_is_not_used(
    slug: str, new_project: ProjectFactory, report: ReliabilityReport, tmp_path: Path
) -> None:
    """Defence in depth: a row written around `add` (by SQL) never becomes a path."""
    project = new_project(
        stage("work", worker=agent("--touch", "ran.txt"), verifier=PASS_VERDICT, max_attempts=1)
    )
    assert project.cli("add", "t1", "--title", "renamed behind our back").exit_code == 0
    with sqlite3.connect(sqlite_file(project.db_url)) as conn:
        conn.execute("UPDATE tasks SET slug = ? WHERE slug = 't1'", (slug,))
    conn.close()
    outside = Path("/tmp/orch-abs-escape")
    before = snapshot(tmp_path, ignore=[f"proj1/{n}" for n in DB_FILES])

    result = run(project, "tick")
    after = snapshot(tmp_path, ignore=[f"proj1/{n}" for n in DB_FILES])
    # The tick may write its lock and under its state and workspace roots, nowhere else.
    own = ("proj1/state", "proj1/tasks", "proj1/orchestrator.lock")
    escaped = [p for p in escapes(before, after) if not p.startswith(own)]
    escaped += [str(outside)] if outside.exists() else []
    escaped += sorted(str(p) for p in tmp_path.rglob("ran.txt"))
    report.escaped(len(escaped))
    assert result.returncode == 0, result.stderr
    assert escaped == []
    rows = query(project.db_url, "SELECT outcome, error FROM attempts")
    assert len(rows) == 1 and rows[0][0] == "worker_error" and "slug" in rows[0][1], rows
    assert violations(project.db_url) == []


# -- values that reach argv, the environment and prompts stay literal ------------------


def injection_values(root: Path) -> list[str]:
    victim, pwned = root / "victim", root / "pwned"
    return [
        f"; rm -rf {victim}",
        f"$(touch {pwned}-1)",
        f"`touch {pwned}-2`",
        f"a;b|c && touch {pwned}-3",
        f"'; touch {pwned}-4; '",
        '"quoted thing"',
        "--output=/etc/x",
        "-rf",
        "{task} {hint} {workspace}",
        "${HOME} $PATH %s %n",
        "line one\nline two",
        " leading and trailing ",
    ]


def dumps_by_task(dump: Path) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for line in dump.read_text().splitlines():
        record = json.loads(line)
        if record["phase"] == "start":
            out[(record["task"], record["attempt"])] = record
    return out


def no_shell_ran(root: Path) -> list[str]:
    found = sorted(str(p) for p in root.rglob("pwned*"))
    return found + ([] if (root / "victim").exists() else ["victim was removed"])


def test_hints_from_reject_notes_arrive_as_one_literal_argument(
    new_project: ProjectFactory, report: ReliabilityReport, tmp_path: Path
) -> None:
    (tmp_path / "victim").write_text("still here")
    values = injection_values(tmp_path)
    dump = tmp_path / "argv.jsonl"
    worker = agent("--dump", str(dump), "--arg={hint}", "--arg={task}")
    project = new_project(
        stage("research", worker=worker, verifier=PASS_VERDICT, gate=True)
        + stage("implement", worker=["true"], verifier=PASS_VERDICT)
    )
    for i in range(len(values)):
        assert project.cli("add", f"i{i:02d}", "--title", "inject").exit_code == 0
    assert run(project, "tick").returncode == 0
    for i, value in enumerate(values):
        rejected = run(project, "reject", f"i{i:02d}", f"--note={value}")
        assert rejected.returncode == 0, rejected.stderr
    assert run(project, "tick").returncode == 0

    seen = dumps_by_task(dump)
    broken = []
    for i, value in enumerate(values):
        record = seen.get((f"i{i:02d}", "2"))
        expected = ["--dump", str(dump), f"--arg={value}", f"--arg=i{i:02d}"]
        ok = (
            record is not None
            and record["argv"] == expected
            and record["env"].get("ORCHESTRATOR_NEXT_HINT") == value
        )
        report.count(HOSTILE, ok)
        if not ok:
            broken.append((value, record and record["argv"]))
    shell = no_shell_ran(tmp_path)
    report.escaped(len(shell))
    assert shell == []
    assert broken == []
    assert violations(project.db_url) == []


def test_verdict_hint_and_task_text_stay_literal(
    new_project: ProjectFactory, report: ReliabilityReport, tmp_path: Path
) -> None:
    (tmp_path / "victim").write_text("still here")
    hint = " ".join(injection_values(tmp_path)) + " nul:\x00: surrogate:\ud800:"
    # In a file: braces in the verifier's own argv would be the config's placeholders.
    verdict = tmp_path / "verdict.json"
    verdict.write_text(json.dumps({"pass": False, "score": 0.2, "next_hint": hint}))
    dump = tmp_path / "argv.jsonl"
    prompt = tmp_path / "proj1" / "prompt.md"
    project = new_project(
        stage(
            "work",
            worker=agent("--dump", str(dump), "--arg={hint}"),
            verifier=["cat", str(verdict)],
            max_attempts=2,
            prompt=str(prompt),
            stdin="prompt",
        )
    )
    prompt.write_text("title={title}\nbody={body}\nhint={hint}\n")
    title = f"$(touch {tmp_path}/pwned-title)"
    body = f"`touch {tmp_path}/pwned-body`; rm -rf {tmp_path}/victim"
    assert project.cli("add", "v1", "--title", title, "--body", body).exit_code == 0
    assert run(project, "tick").returncode == 0

    cleaned = hint.replace("\x00", "").replace("\ud800", "\ufffd")
    second = dumps_by_task(dump).get(("v1", "2"))
    rendered = (project.dir / "state" / "v1" / "work-001" / "prompt.md").read_text()
    checks = [
        second is not None and second["argv"][-1] == f"--arg={cleaned}",
        second is not None and second["env"]["ORCHESTRATOR_NEXT_HINT"] == cleaned,
        rendered == f"title={title}\nbody={body}\nhint=\n",
    ]
    for ok in checks:
        report.count(HOSTILE, ok)
    shell = no_shell_ran(tmp_path)
    report.escaped(len(shell))
    assert shell == []
    assert checks == [True, True, True], (second and second["argv"][-1], rendered)
    assert project.state("v1") == "work:halted"
    assert violations(project.db_url) == []


# -- malformed configurations ------------------------------------------------------------

GOOD_STAGE = stage("research", worker=["true"], verifier=PASS_VERDICT)
CONFIGS = {
    "toml-syntax": ("[orchestrator\nlease_seconds = 1\n", ("invalid TOML", "line 1")),
    "unknown-key": (
        "[orchestrator]\nbogus_key = 1\n\n" + GOOD_STAGE,
        ("orchestrator.bogus_key", "unknown key"),
    ),
    "unknown-stage-key": (
        stage("research", worker=["true"], verifier=PASS_VERDICT, wroker=["x"]),
        ("stages[0] (research).wroker", "unknown key"),
    ),
    "wrong-type": (
        stage("research", worker=["true"], verifier=PASS_VERDICT, timeout_seconds="ten"),
        ("stages[0] (research).timeout_seconds", "'ten'"),
    ),
    "negative-timeout": (
        stage("research", worker=["true"], verifier=PASS_VERDICT, timeout_seconds=-1),
        ("stages[0] (research).timeout_seconds",),
    ),
    "worker-string": (
        '[[pipelines.default.stages]]\nname = "research"\nworker = "rm -rf /"\n',
        ("stages[0] (research).worker",),
    ),
    "duplicate-stage": (
        GOOD_STAGE + GOOD_STAGE,
        ("stages[1] (research).name", "duplicate", "research"),
    ),
    "bad-stage-name": (stage("../up", worker=["true"], verifier=PASS_VERDICT), ("stages[0].name",)),
    # TOML integers have no size limit in tomllib; float() of this one overflows.
    "integer-past-float": (
        "[orchestrator]\nlease_seconds = 1" + "0" * 400 + "\n\n" + GOOD_STAGE,
        ("orchestrator.lease_seconds",),
    ),
    # Past 4,300 digits Python's int() itself refuses, inside tomllib.
    "integer-past-int-parsing": (
        "[orchestrator]\nlease_seconds = 1" + "0" * 5000 + "\n\n" + GOOD_STAGE,
        ("invalid TOML", "digits"),
    ),
}


@pytest.mark.lane(HOSTILE)
@pytest.mark.parametrize("case", sorted(CONFIGS))
def test_malformed_config_is_refused(case: str, new_project: ProjectFactory) -> None:
    project = new_project()
    assert project.cli("add", "t1", "--title", "waiting").exit_code == 0
    before = table_counts(project.db_url)
    kept = files_under(project.dir / "state")  # `add` keeps the pipeline's version there
    text, words = CONFIGS[case]
    project.config.write_text(text)
    for command in (("tick",), ("approve", "t1")):
        result = run(project, *command)
        assert result.returncode == 78, (command, result.returncode, result.stderr)
        line = one_error_line(result.stderr)
        assert line is not None, result.stderr
        for word in (str(project.config), *words):
            assert word in line, (word, line)
    assert table_counts(project.db_url) == before
    assert not (project.dir / "orchestrator.lock").exists()
    assert not (project.dir / "tasks").exists()
    assert files_under(project.dir / "state") == kept  # nothing written under state/


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.exists() else set()


# -- hostile verdicts never crash the tick -----------------------------------------------

OK_SCORE = {"passed", "failed"}
VERDICTS: dict[str, tuple[bytes, set[str], float | None]] = {
    # name: (verifier output, acceptable outcomes, score if recorded)
    "nan": (b'{"pass": true, "score": NaN}', {"passed"}, 0.5),
    "infinity": (b'{"pass": true, "score": -Infinity}', {"passed"}, 0.5),
    "1e400": (b'{"pass": true, "score": 1e400}', {"passed"}, 0.5),
    "400-digits": (b'{"pass": true, "score": 1' + b"0" * 399 + b"}", {"passed"}, 0.5),
    "5000-digits": (
        b'{"pass": true, "score": 1' + b"0" * 4999 + b"}",
        {"passed", "invalid_verdict"},
        None,
    ),
    "deep-array": (b"[" * 100_000, {"invalid_verdict"}, None),
    "deep-inside-object": (
        b'{"pass": true, "score": 0.4, "reasons": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        {"passed", "invalid_verdict"},
        None,
    ),
    "million-braces": (b"{" * 1_000_000, {"invalid_verdict"}, None),
    "surrogate-and-nul": (
        b'{"pass": false, "score": 0.3, "reasons": ["\\ud800", "a\\u0000b", 7],'
        b' "next_hint": "x\\u0000y\\udfff"}',
        {"failed"},
        0.3,
    ),
    "binary-around": (
        bytes(range(256)) * 40 + b'\n{"pass": true, "score": 0.6}\n' + b"\xff\xfe\x00",
        {"passed"},
        0.6,
    ),
    "empty": (b"", {"invalid_verdict"}, None),
    "huge-reasons": (
        b'{"pass": true, "score": 0.8, "reasons": ["' + b"r" * 3_000_000 + b'"]}',
        {"passed", "invalid_verdict"},
        None,
    ),
}


@pytest.mark.lane(HOSTILE)
@pytest.mark.parametrize("case", [*sorted(VERDICTS), "50mb-noise"])
def test_hostile_verdict_never_crashes_the_tick(
    case: str, new_project: ProjectFactory, tmp_path: Path
) -> None:
    if case == "50mb-noise":
        verifier = agent("--noise", str(50_000_000), "--verdict", '{"pass": true, "score": 0.7}')
        accepted, score = {"passed"}, 0.7
    else:
        output, accepted, score = VERDICTS[case]
        (tmp_path / "verdict.out").write_bytes(output)
        verifier = ["cat", str(tmp_path / "verdict.out")]
    project = new_project(stage("check", worker=["true"], verifier=verifier, max_attempts=1))
    assert project.cli("add", "t1", "--title", "judge me").exit_code == 0

    result = run(project, "tick", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    rows = query(project.db_url, "SELECT outcome, score, reasons, next_hint FROM attempts")
    assert len(rows) == 1
    outcome, stored, reasons, next_hint = rows[0]
    assert outcome in accepted, (outcome, accepted)
    if stored is not None:
        assert math.isfinite(stored) and 0.0 <= stored <= 1.0
    if score is not None:
        assert stored == pytest.approx(score)
    for text in [*(json.loads(reasons) if reasons else []), next_hint or ""]:
        assert "\x00" not in text and not any("\ud800" <= ch <= "\udfff" for ch in text)
    assert project.state("t1") in ("complete", "check:halted")
    assert violations(project.db_url) == []


def test_no_shell_in_the_package() -> None:
    """Static: no shell=True, os.system or os.popen anywhere in the package."""
    package = Path(__file__).resolve().parents[2] / "orchestrator"
    offenders = []
    for path in package.rglob("*.py"):
        source = path.read_text()
        for needle in ("shell=True", "os.system(", "os.popen("):
            if needle in source:
                offenders.append(f"{path.name}: {needle}")
    assert offenders == []


# -- hostile command-line values: ages and actor names (issue 22, item 16) --------------

AGES = {"nan": "nan", "inf": "inf", "minus-inf": "-inf", "1e400": "1e400", "negative": "-1"}


@pytest.mark.lane(HOSTILE)
@pytest.mark.parametrize("days", list(AGES.values()), ids=list(AGES))
def test_prune_refuses_an_age_that_is_no_number_of_days(
    days: str, new_project: ProjectFactory
) -> None:
    project = new_project()
    result = run(project, "prune", "--older-than", days)
    assert result.returncode == 2, (result.returncode, result.stderr)  # click's usage error
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"Error: Invalid value for '--older-than': {days!r} is not a finite number of days, "
        "0 or more"
    )


@pytest.mark.lane(HOSTILE)
@pytest.mark.parametrize("days", ["3000000", "1e9", "999999999999"])
def test_prune_with_an_age_older_than_the_calendar_finds_nothing(
    days: str, new_project: ProjectFactory
) -> None:
    project = new_project()
    assert project.cli("add", "t1", "--title", "kept").exit_code == 0
    result = run(project, "prune", "--older-than", days)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "freed 0 B in 0 folders\n"


BY_NAMES = {
    "not-utf8": "\udcff",  # the byte 0xff in argv
    "201-chars": "a" * 201,
    "escape": "\x1b[31mroot",
    "newline": "alice\nbob",
    "rtl-override": "abc\u202efed",
}


@pytest.mark.lane(HOSTILE)
@pytest.mark.parametrize("by", list(BY_NAMES.values()), ids=list(BY_NAMES))
def test_hostile_by_name_is_refused(by: str, new_project: ProjectFactory) -> None:
    project = new_project()
    assert project.cli("add", "t1", "--title", "waiting").exit_code == 0
    before = table_counts(project.db_url)
    result = run(project, "halt", "t1", "--by", by, fresh=True)
    assert result.returncode == 1, (result.returncode, result.stderr)
    line = one_error_line(result.stderr)
    assert line is not None and line.startswith("Error: --by ") and "the name" in line, (
        result.stderr
    )
    assert table_counts(project.db_url) == before
