"""Helpers for the reliability suite: real processes, invariants, snapshots.

Everything that crashes is a real, separate `orchestrator` process: a fork
of the pre-imported fork server (`forkserver.py`), or with
`ORCHESTRATOR_TEST_FRESH_PROCESSES=1` a fresh `python -m orchestrator`; the
checks afterwards read the database directly (River/Jepsen style: external
faults, then SQL invariants).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import forkserver
from e2e.e2e_support import AGENT, agent
from reliability_report import percentile
from sqlalchemy import create_engine, text
from support import DEFAULT_STAGES, PG_DATABASES, Project, check_invariants

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "orchestrator"
COUNTER = Path(__file__).with_name("stmt_counter.py")
CRASH_RC = 137  # os._exit(137) in orchestrator/testing.py: like SIGKILL, no finalisers

PASS_VERDICT = ["sh", "-c", 'echo \'{"pass": true, "score": 0.9}\'']

# research [gate] -> implement -> complete, with commands that cost no Python start.
GATED = DEFAULT_STAGES


def fault_points() -> dict[str, str]:
    """Every named crash point in the package: name -> module file name."""
    found: dict[str, str] = {}
    pattern = re.compile(r"""fault_point\(\s*["']([A-Za-z0-9_]+)["']\s*\)""")
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "testing.py":
            continue
        for name in pattern.findall(path.read_text()):
            found[name] = path.name
    return found


# -- processes -------------------------------------------------------------------------


def run(
    project: Project,
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 90,
    preexec_fn: Callable[[], None] | None = None,
    fresh: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`orchestrator ARGS` as a real process, with a hard deadline: forked from
    the fork server unless it needs a `preexec_fn` (set in a fresh child) or
    asks to be `fresh`."""
    if preexec_fn is None and not fresh and forkserver.enabled():
        try:
            return forkserver.run(
                args, cwd=project.dir, env=project.process_env(env), timeout=timeout
            )
        except subprocess.TimeoutExpired:
            raise AssertionError(f"orchestrator {' '.join(args)} hung for {timeout}s") from None
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=project.dir,
        env=project.process_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
        preexec_fn=preexec_fn,  # noqa: PLW1509 - a limit for the child; no threads here
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError(f"orchestrator {' '.join(args)} hung for {timeout}s") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def crash_env(point: str) -> dict[str, str]:
    return {"ORCHESTRATOR_TEST_FAULT": f"{point}:exit"}


def one_error_line(stderr: str) -> str | None:
    """The `Error: ...` line when stderr is exactly that one line (with
    `--quiet`, after the UTC time that starts every line of cron's log)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    if len(lines) != 1 or "Traceback" in stderr:
        return None
    line = re.sub(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00 ", "", lines[0])
    return line if line.startswith("Error: ") else None


# -- projects ----------------------------------------------------------------------------


def clone_project(source: Project, folder: Path) -> Project:
    """A copy of a (quiescent) project: config, database, state and workspaces."""
    shutil.copytree(source.dir, folder, symlinks=True)
    if not source.db_url.startswith("sqlite"):
        url = PG_DATABASES.copy(source.db_url)
        return Project(dir=folder, db_url=url, config=folder / source.config.name)
    src_db = sqlite_file(source.db_url)
    db = folder / src_db.relative_to(source.dir)
    for suffix in ("-shm",):  # a stale -shm is rebuilt by SQLite; never copy one
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    return Project(dir=folder, db_url=f"sqlite:///{db}", config=folder / source.config.name)


def sqlite_file(db_url: str) -> Path:
    assert db_url.startswith("sqlite:///"), db_url
    return Path(db_url.removeprefix("sqlite:///"))


def query(db_url: str, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(text(sql), params)]
    finally:
        engine.dispose()


def wait_for_dead_sessions(db_url: str, timeout: float = 120.0) -> None:
    """PostgreSQL: wait until no other session is open on the database. A
    client killed just after sending COMMIT leaves its server session to
    finish that commit on its own; a recovery tick that looked before it
    landed would leave its row to the tick after (cron's next minute),
    which a check made at once would call lost."""
    if not db_url.startswith("postgresql"):
        return
    deadline = time.monotonic() + timeout
    sql = (
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    while query(db_url, sql)[0][0]:
        if time.monotonic() > deadline:
            raise AssertionError(f"sessions of a killed tick still open after {timeout:g}s")
        time.sleep(0.05)  # a server-side state with no event to wait on


def events(db_url: str, slug: str = "t1") -> list[str]:
    rows = query(
        db_url,
        "SELECT x.event FROM transitions x JOIN tasks t ON t.id = x.task_id "
        "WHERE t.slug = :s ORDER BY x.seq",
        s=slug,
    )
    return [r[0] for r in rows]


def outcomes(db_url: str, slug: str = "t1") -> list[str | None]:
    rows = query(
        db_url,
        "SELECT a.outcome FROM attempts a JOIN tasks t ON t.id = a.task_id "
        "WHERE t.slug = :s ORDER BY a.id",
        s=slug,
    )
    return [r[0] for r in rows]


def table_counts(db_url: str) -> dict[str, int]:
    return {
        table: query(db_url, f"SELECT count(*) FROM {table}")[0][0]
        for table in ("tasks", "attempts", "transitions", "ticks")
    }


def transition_log(db_url: str) -> list[tuple[Any, ...]]:
    """Every transition as an immutable fact (what a later fault must never lose)."""
    return query(
        db_url,
        "SELECT task_id, seq, from_state, to_state, event, attempt_id FROM transitions "
        "ORDER BY task_id, seq",
    )


# -- invariants ----------------------------------------------------------------------------


@dataclass
class TransitionAudit:
    """Per-attempt transition counts: each attempt is opened by one claim and
    closed by at most one transition (exactly one when it ran to a result)."""

    lost: list[str]
    duplicated: list[str]


def audit_transitions(db_url: str) -> TransitionAudit:
    lost: list[str] = []
    duplicated: list[str] = []
    rows = query(
        db_url,
        "SELECT a.id, t.slug, a.stage, a.number, a.outcome, a.finished_at, a.error, "
        "  (SELECT count(*) FROM transitions x WHERE x.attempt_id = a.id AND x.event = 'claim'),"
        "  (SELECT count(*) FROM transitions x WHERE x.attempt_id = a.id AND x.event <> 'claim'),"
        "  a.round, a.task_id, a.candidates"
        " FROM attempts a JOIN tasks t ON t.id = a.task_id ORDER BY a.id",
    )
    # Best of N: a round is claimed once (its first candidate) and closed
    # once (the candidate its decision names), however many candidates.
    rounds: dict[tuple[int, str, int], list[Any]] = {}
    for row in rows:
        if row[9] is not None:
            rounds.setdefault((row[10], row[2], row[9]), []).append(row)
    for (_task, stage, round_no), members in rounds.items():
        name = f"{members[0][1]} {stage} round {round_no}"
        claims, closes = sum(m[7] for m in members), sum(m[8] for m in members)
        if claims != 1:
            (duplicated if claims > 1 else lost).append(f"{name}: {claims} claim transitions")
        if closes > 1:
            duplicated.append(f"{name}: {closes} closing transitions")
        fenced_off = any(m[6] is not None and m[6].startswith("the task changed") for m in members)
        full = len(members) == members[0][11]
        if full and all(m[5] is not None for m in members) and closes == 0 and not fenced_off:
            lost.append(f"{name}: all closed without a closing transition")
    for _id, slug, stage, number, outcome, finished, error, claims, closes, round_no, *_ in rows:
        if round_no is not None:
            continue
        name = f"{slug} {stage}#{number}"
        if claims > 1:
            duplicated.append(f"{name}: {claims} claim transitions")
        if claims == 0:
            lost.append(f"{name}: no claim transition")
        if closes > 1:
            duplicated.append(f"{name}: {closes} closing transitions")
        fenced_off = error is not None and error.startswith("the task changed")
        if finished is not None and closes == 0 and not fenced_off:
            lost.append(f"{name}: closed ({outcome}) without a closing transition")
        if finished is None and closes:
            lost.append(f"{name}: open, yet it has a closing transition")
    return TransitionAudit(lost, duplicated)


def violations(db_url: str, *, allow_running: bool = False) -> list[str]:
    """`support.check_invariants` plus the checks the fault tests add:

    - each attempt has one claim transition and at most one closing one;
    - every score (and `score_history` row) belongs to a closed attempt;
    - an open attempt belongs to a running task at the attempt's stage;
    - no transition refers to a missing attempt; foreign keys hold (SQLite).
    """
    problems = list(check_invariants(db_url, allow_running=allow_running))
    audit = audit_transitions(db_url)
    problems += audit.lost + audit.duplicated
    for slug, stage, number in query(
        db_url,
        "SELECT t.slug, a.stage, a.number FROM attempts a JOIN tasks t ON t.id = a.task_id "
        "WHERE a.finished_at IS NULL AND (a.score IS NOT NULL OR a.pass IS NOT NULL "
        "OR a.outcome IS NOT NULL)",
    ):
        problems.append(f"{slug} {stage}#{number}: verdict on an open attempt")
    open_rows = query(db_url, "SELECT count(*) FROM score_history WHERE at IS NULL")[0][0]
    if open_rows:
        problems.append(f"{open_rows} score_history rows of open attempts")
    for slug, stage, number, status, task_stage in query(
        db_url,
        "SELECT t.slug, a.stage, a.number, t.status, t.stage FROM attempts a "
        "JOIN tasks t ON t.id = a.task_id WHERE a.finished_at IS NULL",
    ):
        if status != "running" or task_stage != stage:
            problems.append(
                f"{slug} {stage}#{number}: open while the task is {task_stage}:{status}"
            )
    dangling = query(
        db_url,
        "SELECT count(*) FROM transitions x WHERE x.attempt_id IS NOT NULL AND NOT EXISTS "
        "(SELECT 1 FROM attempts a WHERE a.id = x.attempt_id)",
    )[0][0]
    if dangling:
        problems.append(f"{dangling} transitions name a missing attempt")
    if db_url.startswith("sqlite"):
        bad = query(db_url, "PRAGMA foreign_key_check")
        if bad:
            problems.append(f"foreign_key_check: {bad[:5]}")
    return problems


# -- files -------------------------------------------------------------------------------


def snapshot(root: Path, ignore: Iterable[str] = ()) -> dict[str, str]:
    """Path -> kind and content hash of everything under `root` (links not followed)."""
    skipped = tuple(ignore)
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if any(rel == s or rel.startswith(s) for s in skipped):
            continue
        if path.is_symlink():
            out[rel] = f"link:{os.readlink(path)}"
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


__all__ = [
    "AGENT",
    "COUNTER",
    "CRASH_RC",
    "GATED",
    "PASS_VERDICT",
    "TransitionAudit",
    "agent",
    "audit_transitions",
    "clone_project",
    "crash_env",
    "events",
    "fault_points",
    "file_digest",
    "one_error_line",
    "outcomes",
    "percentile",
    "query",
    "run",
    "snapshot",
    "sqlite_file",
    "table_counts",
    "transition_log",
    "violations",
]
