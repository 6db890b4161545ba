"""Runaway guards (issue 15): no-change halts, backoff on retry exit codes,
strict verdicts; real ticks (`python -m orchestrator tick`), real workers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from e2e.e2e_support import PASS, stage
from support import Project, make_project

RISING = ["sh", "-c", 'echo \'{"pass": false, "score": 0.{attempt}}\'']
GIT = "git -c user.email=t@example.com -c user.name=t"


def outcomes(project: Project, slug: str = "t1") -> list[tuple[Any, ...]]:
    return project.query(
        "SELECT a.number, a.outcome, a.workspace_changed FROM attempts a "
        "JOIN tasks t ON t.id = a.task_id WHERE t.slug = :slug ORDER BY a.number",
        slug=slug,
    )


def halt_reason(project: Project, slug: str = "t1") -> Any:
    return project.query("SELECT halt_reason FROM tasks WHERE slug = :s", s=slug)[0][0]


def test_a_worker_that_changes_nothing_halts_as_no_progress(project: Project) -> None:
    project.write_config(
        stage("work", worker=["true"], verifier=RISING, max_attempts=6, halt_after_no_change=2)
    )
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    done = project.run("tick")
    assert done.returncode == 0, done.stderr
    assert project.state("t1") == "work:halted"
    assert halt_reason(project) == "no_progress"
    assert [(n, o, bool(c)) for n, o, c in outcomes(project)] == [
        (1, "failed", False),
        (2, "failed", False),
    ]
    explained = project.run("explain", "t1")
    assert "halted    no_progress: halt_after_no_change" in explained.stdout
    assert "resume    orchestrator resume t1" in explained.stdout


def test_a_worker_that_commits_does_not_halt(project: Project) -> None:
    project.write_config(
        "[pipelines.default]\n"
        'setup = ["sh", "-c", "git init -q {workspace}"]\n\n'
        + stage(
            "work",
            worker=["sh", "-c", f"{GIT} commit -q --allow-empty -m 'attempt {{attempt}}'"],
            verifier=RISING,
            max_attempts=3,
            halt_after_no_change=1,
        )
    )
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    done = project.run("tick")
    assert done.returncode == 0, done.stderr
    assert halt_reason(project) == "max_attempts"
    assert [(n, o, bool(c)) for n, o, c in outcomes(project)] == [
        (1, "failed", True),
        (2, "failed", True),
        (3, "failed", True),
    ]


def test_an_edit_in_a_git_workspace_counts_and_a_rewrite_does_not(project: Project) -> None:
    """Rewriting a file with the same content is no change; a new content is."""
    worker = [
        "sh",
        "-c",
        'if [ {attempt} -le 2 ]; then echo same > f; else echo "{attempt}" > f; fi',
    ]
    project.write_config(
        "[pipelines.default]\n"
        'setup = ["sh", "-c", "git init -q {workspace}"]\n\n'
        + stage("work", worker=worker, verifier=RISING, max_attempts=4, halt_after_no_change=2)
    )
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    assert project.run("tick").returncode == 0
    changed = [bool(c) for _, _, c in outcomes(project)]
    assert changed == [True, False, True, True]
    assert halt_reason(project) == "max_attempts"


def backoff_stage(**keys: Any) -> str:
    worker = ["sh", "-c", "[ {attempt} -ge 3 ] || exit 75"]
    settings = {"backoff": {"initial": 1.5, "factor": 1.0, "max": 1.5, "tries": 3}}
    return stage(
        "work",
        worker=worker,
        verifier=PASS,
        max_attempts=1,
        retry_exit_codes=[75],
        **{**settings, **keys},
    )


def attempt_times(project: Project) -> list[tuple[Any, ...]]:
    return project.query(
        "SELECT number, outcome, host, started_at, finished_at FROM attempts ORDER BY number"
    )


def tick_until(project: Project, count: int, limit: float = 30.0) -> None:
    """Tick (real processes) until the task has `count` attempts."""
    deadline = datetime.now(UTC) + timedelta(seconds=limit)
    while len(attempt_times(project)) < count:
        assert datetime.now(UTC) < deadline, attempt_times(project)
        done = project.run("tick")
        assert done.returncode == 0, done.stderr


def as_utc(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def set_backoff(project: Project, until: datetime) -> None:
    """Move the wait with SQL, so no check races a loaded machine's clock."""
    from sqlalchemy import create_engine, text

    value = until.replace(tzinfo=None) if "sqlite" in project.db_url else until
    engine = create_engine(project.db_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE tasks SET backoff_until = :v"), {"v": value})
    finally:
        engine.dispose()


def first_wait_then_hold(project: Project, other: Project | None = None) -> None:
    """The first backoff's wait is as configured (1.5 s after the attempt),
    and while it lasts (made an hour with SQL) no tick claims the task."""
    [(_, _, _, _, finished)] = attempt_times(project)
    [(until,)] = project.query("SELECT backoff_until FROM tasks")
    assert timedelta(seconds=1.4) <= as_utc(until) - as_utc(finished) <= timedelta(seconds=1.6)
    set_backoff(project, datetime.now(UTC) + timedelta(hours=1))
    ticker = other or project
    assert ticker.run("tick").returncode == 0
    assert len(attempt_times(project)) == 1
    set_backoff(project, datetime.now(UTC) - timedelta(seconds=1))


def test_a_retry_exit_code_waits_out_its_backoff_and_spends_no_attempt(project: Project) -> None:
    project.write_config(backoff_stage())
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    assert project.run("tick").returncode == 0
    # max_attempts = 1, yet the task is ready: the backoff spent nothing.
    assert project.state("t1") == "work"
    [(number, outcome, *_)] = attempt_times(project)
    assert (number, outcome) == (1, "backoff")
    first_wait_then_hold(project)

    tick_until(project, 3)
    rows = attempt_times(project)
    assert [r[1] for r in rows] == ["backoff", "backoff", "passed"]
    # The second wait, set by the engine, held the ticks off for 1.5 s.
    assert as_utc(rows[2][3]) - as_utc(rows[1][4]) >= timedelta(seconds=1.4), rows
    assert project.state("t1") == "complete"


def test_backoff_tries_are_bounded(project: Project) -> None:
    project.write_config(
        stage(
            "work",
            worker=["sh", "-c", "exit 75"],
            verifier=PASS,
            max_attempts=1,
            retry_exit_codes=[75],
            backoff={"initial": 0.0, "max": 0.0, "tries": 2},
        )
    )
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    assert project.run("tick").returncode == 0
    assert [r[1] for r in attempt_times(project)] == ["backoff", "backoff", "worker_error"]
    assert halt_reason(project) == "max_attempts"


@pytest.mark.pg
def test_backoff_holds_across_two_hosts(tmp_path: Any, migrated_pg: str) -> None:
    hosts = []
    for name in ("host-a", "host-b"):
        project = make_project(tmp_path / name, migrated_pg, backoff_stage(), affinity="any")
        project.env["ORCHESTRATOR_HOST"] = name
        hosts.append(project)
    a, b = hosts
    assert a.cli("add", "t1", "--title", "t").exit_code == 0
    assert a.run("tick").returncode == 0
    assert [r[1:3] for r in attempt_times(a)] == [("backoff", "host-a")]
    # The other host sees the same wait: it claims nothing before it is over.
    first_wait_then_hold(a, b)
    tick_until(b, 3)
    rows = attempt_times(b)
    assert [r[1:3] for r in rows] == [
        ("backoff", "host-a"),
        ("backoff", "host-b"),
        ("passed", "host-b"),
    ]
    assert as_utc(rows[2][3]) - as_utc(rows[1][4]) >= timedelta(seconds=1.4), rows
    assert b.state("t1") == "complete"


@pytest.mark.parametrize(
    ("raw", "strict", "outcome"),
    [
        ('"no"', True, "invalid_verdict"),
        ('"no"', False, "passed"),
        ("1", True, "invalid_verdict"),
        ('"0"', True, "invalid_verdict"),
        ('" TRUE "', True, "passed"),
        ("true", True, "passed"),
        ('"false"', True, "failed"),
    ],
)
def test_strict_verdict(project: Project, raw: str, strict: bool, outcome: str) -> None:
    verdict = ["sh", "-c", f'echo \'{{"pass": {raw}, "score": 1.0}}\'']
    project.write_config(stage("gate", verifier=verdict, max_attempts=1, strict_verdict=strict))
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    assert project.run("tick").returncode == 0
    [(_, recorded, _)] = outcomes(project)
    assert recorded == outcome
    if outcome == "invalid_verdict":
        [(error,)] = project.query("SELECT error FROM attempts")
        assert error.startswith("strict_verdict:")


# review finding: the config accepts any finite backoff (`max >= initial >= 0`),
# but a wait past timedelta's range (~8.6e13 s) fails to record every attempt
# ("Python int too large to convert to C int"), leaving it running until the
# next tick recovers it, for ever.
def test_a_huge_backoff_is_refused_or_recorded(project: Project) -> None:
    project.write_config(
        stage(
            "work",
            worker=["sh", "-c", "exit 75"],
            verifier=PASS,
            retry_exit_codes=[75],
            backoff={"initial": 1e15, "factor": 1.0, "max": 1e15, "tries": 3},
        )
    )
    added = project.run("add", "t1", "--title", "t")
    if added.returncode != 0:
        assert "backoff" in added.stderr  # refused by the config: fine
        return
    done = project.run("tick")
    assert "could not be recorded" not in done.stderr
    assert [o for _, o, _ in outcomes(project)] == ["backoff"]
    assert project.state("t1") == "work"


# review finding: in a git workspace an untracked file's content is hashed by
# the name `git status --porcelain` prints, with only the quotes stripped; a
# name git C-quotes (non-ASCII, a tab...) is then a path that does not exist,
# hashed as "?", so new content in `résumé.md` is "no change" and the task
# halts as no_progress although the agent rewrote the file every attempt.
def test_new_content_in_an_untracked_non_ascii_file_counts_as_a_change(project: Project) -> None:
    worker = ["sh", "-c", 'echo "draft {attempt}" > résumé.md']
    project.write_config(
        "[pipelines.default]\n"
        'setup = ["sh", "-c", "git init -q {workspace}"]\n\n'
        + stage("work", worker=worker, verifier=RISING, max_attempts=3, halt_after_no_change=1)
    )
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    assert project.run("tick").returncode == 0
    assert [bool(c) for _, _, c in outcomes(project)] == [True, True, True]
    assert halt_reason(project) == "max_attempts"


# review finding: the fingerprint "after" is taken once the verifier has run,
# so a verifier that writes into the workspace (a report, coverage data, a
# judge's log) makes every attempt "changed" and the guard never fires,
# although the configuration reference promises it counts attempts "whose worker left the
# workspace as it was".
def test_a_verifier_writing_a_report_does_not_hide_a_worker_that_changed_nothing(
    project: Project,
) -> None:
    verifier = [
        "sh",
        "-c",
        'echo {attempt} > judge-report.txt; echo \'{"pass": false, "score": 0.{attempt}}\'',
    ]
    project.write_config(
        stage("work", worker=["true"], verifier=verifier, max_attempts=6, halt_after_no_change=2)
    )
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    assert project.run("tick").returncode == 0
    assert halt_reason(project) == "no_progress"
