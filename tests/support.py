"""Test helpers shared by the suite: projects, CLI drivers, the invariant checker."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import forkserver
import pytest
from click.testing import CliRunner, Result
from sqlalchemy import create_engine, text

from orchestrator.cli import cli
from orchestrator.domain.pipeline import TRANSITIONS, Event, Status, Target, parse_state

FAKES = Path(__file__).parent / "fakes"
PG_ENV = "ORCHESTRATOR_TEST_PG_URL"


def pg_server_url() -> str:
    """The PostgreSQL server tests may create databases on; skips without one,
    except under CI=true, where it fails instead."""
    url = os.environ.get(PG_ENV, "")
    if url:
        return url
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{PG_ENV} is not set, and CI=true forbids skipping PostgreSQL tests")
    pytest.skip(f"PostgreSQL tests need {PG_ENV} (a server where CREATE DATABASE is allowed)")


class PgDatabases:
    """PostgreSQL databases for the tests, copied from a template.

    Migrating costs far more than `CREATE DATABASE ... TEMPLATE`, so one
    database is migrated per session (conftest's `template_pg`) and each
    test's database is a copy; a clone of a project copies its database the
    same way. Each test's databases are dropped when it ends (`drop_all`)."""

    def __init__(self) -> None:
        self.server: str | None = None
        self.made: list[str] = []
        self.drop_errors: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        self._dropper: threading.Thread | None = None

    def _admin(self) -> Any:
        assert self.server is not None
        return create_engine(self.server, isolation_level="AUTOCOMMIT")

    def copy(self, source_url: str) -> str:
        from sqlalchemy.engine import make_url

        source = make_url(source_url)
        name = f"orch_copy_{os.getpid()}_{uuid.uuid4().hex[:10]}"
        admin = self._admin()
        try:
            with admin.connect() as conn:
                # A template must have no other session: end any left over.
                conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = :db AND pid <> pg_backend_pid()"
                    ),
                    {"db": source.database},
                )
                conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{source.database}"'))
        finally:
            admin.dispose()
        self.made.append(name)
        return source.set(database=name).render_as_string(hide_password=False)

    def drop_all(self) -> None:
        """Drop this test's databases in the background: each DROP DATABASE
        forces a server checkpoint (seconds on a busy server), and the next
        test need not wait for them. `wait` before the session ends."""
        if not self.made:
            return
        if self._dropper is None:
            self._dropper = threading.Thread(target=self._drop_queued, daemon=True)
            self._dropper.start()
        for name in self.made:
            self._queue.put(name)
        self.made.clear()

    def _drop_queued(self) -> None:
        while True:
            name = self._queue.get()
            try:
                admin = self._admin()
                try:
                    with admin.connect() as conn:
                        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                finally:
                    admin.dispose()
            except Exception as exc:
                self.drop_errors.append(f"{name}: {exc}")
            finally:
                self._queue.task_done()

    def wait(self) -> list[str]:
        """Block until every queued database is dropped; the drops that failed."""
        self._queue.join()
        return self.drop_errors


PG_DATABASES = PgDatabases()


def copy_database(template_db: Path, path: Path) -> str:
    """The URL of a migrated SQLite database at `path`: a copy of the
    session's `template_db` fixture (a copy costs a millisecond, a migration
    about a second)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template_db, path)
    return f"sqlite:///{path}"


DEFAULT_STAGES = """
[[pipelines.default.stages]]
name = "research"
gate = true
worker = ["true"]
verifier = ["sh", "-c", "echo '{\\"pass\\": true, \\"score\\": 0.9}'"]

[[pipelines.default.stages]]
name = "implement"
worker = ["true"]
verifier = ["sh", "-c", "echo '{\\"pass\\": true, \\"score\\": 1.0}'"]
"""


def run_orchestrator(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float = 300,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`python -m orchestrator ARGS` as a real process; the timeout is a
    safety net against a hang, generous for a loaded machine.

    The process is a fork of the pre-imported fork server (`forkserver.py`),
    which spares each run the interpreter's start and the imports (most of
    a short command's time), unless its environment asks for what only a
    fresh interpreter reads, or `ORCHESTRATOR_TEST_FRESH_PROCESSES=1`."""
    if forkserver.can_fork(env):
        return forkserver.run(args, cwd=cwd, env=env, timeout=timeout, input=input, entry="module")
    return subprocess.run(  # noqa: PLW1510 - callers assert on returncode
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
    )


@dataclass
class Project:
    dir: Path
    db_url: str
    config: Path
    env: dict[str, str] = field(default_factory=dict)

    def cli(self, *args: str, input: str | None = None) -> Result:
        """Run a command in-process through click's CliRunner."""
        runner = CliRunner()
        env = {
            "ORCHESTRATOR_CONFIG": str(self.config),
            "ORCHESTRATOR_DB_URL": self.db_url,
            "ORCHESTRATOR_TASK": None,
            **self.env,
        }
        return runner.invoke(cli, list(args), env=env, input=input, catch_exceptions=False)

    def process_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
        env.update(ORCHESTRATOR_CONFIG=str(self.config), ORCHESTRATOR_DB_URL=self.db_url)
        env.update(self.env)
        env.update(extra or {})
        return env

    def run(
        self,
        *args: str,
        timeout: float = 300,
        extra_env: Mapping[str, str] | None = None,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run a command as a real process (`python -m orchestrator`, see
        `run_orchestrator`) in the project's folder."""
        return run_orchestrator(
            args, cwd=self.dir, env=self.process_env(extra_env), timeout=timeout, input=input
        )

    def popen(
        self, *args: str, extra_env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "orchestrator", *args],
            cwd=self.dir,
            env=self.process_env(extra_env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def write_config(self, stages: str, **orchestrator: Any) -> None:
        write_config(self.config, stages, **orchestrator)

    def query(self, sql: str, **params: Any) -> list[tuple[Any, ...]]:
        engine = create_engine(self.db_url)
        try:
            with engine.connect() as conn:
                return [tuple(row) for row in conn.execute(text(sql), params)]
        finally:
            engine.dispose()

    def state(self, slug: str) -> str:
        rows = self.query("SELECT stage, status FROM tasks WHERE slug = :slug", slug=slug)
        stage, status = rows[0]
        return stage if status in ("ready", "complete") else f"{stage}:{status}"

    def counts(self) -> dict[str, int]:
        return {
            table: self.query(f"SELECT count(*) FROM {table}")[0][0]
            for table in ("tasks", "attempts", "transitions", "ticks")
        }


def _toml_value(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, bool) else str(value).lower()


def write_config(path: Path, stages: str, **orchestrator: Any) -> None:
    settings = {
        "workspace_root": "tasks",
        "state_root": "state",
        "lock_file": "orchestrator.lock",
        "lease_seconds": 60,
        "retry_interval": 0,
        **orchestrator,
    }
    head = "[orchestrator]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in settings.items())
    path.write_text(head + "\n" + textwrap.dedent(stages))


def make_project(
    folder: Path, db_url: str, stages: str = DEFAULT_STAGES, **orchestrator: Any
) -> Project:
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "orchestrator.toml"
    write_config(config, stages, **orchestrator)
    return Project(dir=folder, db_url=db_url, config=config)


def _wait_problems(conn: Any) -> list[str]:
    """`add --after` and subtasks: edges between real tasks, no cycle, real parents."""
    from orchestrator.domain.waits import find_cycle

    problems: list[str] = []
    ids = dict(conn.execute(text("SELECT id, slug FROM tasks")).all())
    edges: dict[str, list[str]] = {slug: [] for slug in ids.values()}
    for task_id, after_id in conn.execute(text("SELECT task_id, after_id FROM task_dependencies")):
        if task_id not in ids or after_id not in ids or task_id == after_id:
            problems.append(f"task_dependencies ({task_id}, {after_id}): not two existing tasks")
            continue
        edges[ids[task_id]].append(ids[after_id])
    cycle = find_cycle(edges)
    if cycle is not None:
        problems.append("task_dependencies cycle: " + " -> ".join(cycle))
    for task_id, parent_id in conn.execute(
        text("SELECT id, parent_id FROM tasks WHERE parent_id IS NOT NULL")
    ):
        if parent_id not in ids or parent_id == task_id:
            problems.append(f"{ids[task_id]}: parent_id {parent_id} is not another task")
    return problems


def check_invariants(db_url: str, *, allow_running: bool = True) -> list[str]:
    """The promises every fault test checks afterwards; returns the violations.

    - each task's state equals the to_state of its newest transition;
    - transition seq runs 1..n per task, with no gap or duplicate;
    - every edge is one of the state machine's (TRANSITIONS);
    - a landing task has no open attempt; a landed commit only on a
      finished (or halted) task;
    - a running task has exactly one open attempt, and no task more than one,
      always; no attempt is left open at all unless `allow_running` (a
      halted task's attempt stays open until its tick notices);
    - an attempt's `start_commit` is NULL, `pending`, `none` or a sha;
    - a `pending` attempt (a verdict that waits) has no `pass` and no `score`,
      so no plateau window ever holds one;
    - `task_dependencies` joins two different existing tasks, with no cycle,
      and a task's `parent_id` names another existing task;
    - a pooled attempt's pool has its `pools` row, whose pause is whole;
    - only a finished attempt is marked restored (`restored_at`);
    - SQLite's integrity_check is ok.
    """
    problems: list[str] = []
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            tasks = conn.execute(text("SELECT id, slug, stage, status, version FROM tasks")).all()
            for task_id, slug, stage, status, version in tasks:
                rows = conn.execute(
                    text(
                        "SELECT seq, from_state, to_state, event FROM transitions "
                        "WHERE task_id = :t ORDER BY seq"
                    ),
                    {"t": task_id},
                ).all()
                seqs = [r[0] for r in rows]
                if seqs != list(range(1, len(rows) + 1)):
                    problems.append(f"{slug}: transition seq not contiguous: {seqs}")
                state = stage if status in ("ready", "complete") else f"{stage}:{status}"
                if not rows or rows[-1][2] != state:
                    problems.append(
                        f"{slug}: state {state} != newest to_state {rows[-1][2] if rows else None}"
                    )
                if version != len(rows):
                    problems.append(f"{slug}: version {version} != {len(rows)} transitions")
                for _seq, before, after, event in rows:
                    if before is None:
                        continue
                    problem = _edge_problem(before, after, event)
                    if problem:
                        problems.append(f"{slug}: {problem}")
                open_attempts = conn.execute(
                    text(
                        "SELECT count(*) FROM attempts WHERE task_id = :t AND finished_at IS NULL"
                    ),
                    {"t": task_id},
                ).scalar_one()
                if status == "landing" and open_attempts:
                    problems.append(f"{slug}: landing with {open_attempts} open attempts")
                # One open attempt while running; a round's, one per slot.
                problems += _round_problems(conn, task_id, slug, stage, status, open_attempts)
                if open_attempts and not allow_running:
                    problems.append(f"{slug}: {open_attempts} attempts still open")
            landed = conn.execute(
                text("SELECT slug, status FROM tasks WHERE landed_commit IS NOT NULL")
            ).all()
            for slug, status in landed:
                # On a `landing` task: the intent of its move (its commit point).
                if status not in ("complete", "halted", "cancelled", "landing"):
                    problems.append(f"{slug}: a landed commit on a {status} task")
            problems.extend(_wait_problems(conn))
            # A pooled attempt was claimed under its pool's row lock: the row exists.
            orphans = conn.execute(
                text(
                    "SELECT DISTINCT pool FROM attempts WHERE pool IS NOT NULL "
                    "AND pool NOT IN (SELECT name FROM pools)"
                )
            ).all()
            for (pool,) in orphans:
                problems.append(f"attempts of pool {pool!r} but no pools row")
            halves = conn.execute(
                text("SELECT name FROM pools WHERE (paused_until IS NULL) <> (paused_at IS NULL)")
            ).all()
            for (pool,) in halves:
                problems.append(f"pool {pool!r}: paused_until and paused_at disagree")
            starts = conn.execute(text("SELECT id, start_commit FROM attempts")).all()
            for attempt_id, start in starts:
                if start is not None and not _start_commit_ok(start):
                    problems.append(f"attempt {attempt_id}: start_commit {start!r}")
            scored_waits = conn.execute(
                text(
                    "SELECT id FROM attempts WHERE outcome = 'pending' "
                    "AND (score IS NOT NULL OR pass IS NOT NULL)"
                )
            ).all()
            for (attempt_id,) in scored_waits:
                problems.append(f"attempt {attempt_id}: pending with a pass or a score")
            restored_open = conn.execute(
                text(
                    "SELECT id FROM attempts WHERE restored_at IS NOT NULL AND finished_at IS NULL"
                )
            ).all()
            for (attempt_id,) in restored_open:
                problems.append(f"attempt {attempt_id}: restored while still open")
            if conn.dialect.name == "sqlite":
                check = conn.exec_driver_sql("PRAGMA integrity_check").scalar_one()
                if check != "ok":
                    problems.append(f"integrity_check: {check}")
    finally:
        engine.dispose()
    return problems


def _round_problems(
    conn: Any, task_id: int, slug: str, stage: str, status: str, open_attempts: int
) -> list[str]:
    """One open attempt per task, or (best of N) per slot of one round:
    a running task has exactly one open attempt, unless its stage's newest
    round is running, which may have 0..K open (its slots claimed one by
    one); every slot is 1..K; a round is decided at most once."""
    problems: list[str] = []
    rows = conn.execute(
        text(
            "SELECT round, candidate, candidates, stage FROM attempts "
            "WHERE task_id = :t AND finished_at IS NULL"
        ),
        {"t": task_id},
    ).all()
    rounds = {(r[3], r[0]) for r in rows}
    slots = [r[1] for r in rows]
    if len(slots) != len(set(slots)):
        problems.append(f"{slug}: two open attempts in one candidate slot")
    in_round = all(r[0] is not None for r in rows) and len(rounds) <= 1
    newest = conn.execute(
        text(
            "SELECT round, candidate, candidates FROM attempts WHERE task_id = :t AND stage = :s "
            "ORDER BY number DESC LIMIT 1"
        ),
        {"t": task_id, "s": stage},
    ).first()
    running_round = newest is not None and newest[0] is not None
    if status == "running" and not (open_attempts == 1 or (running_round and in_round)):
        problems.append(f"{slug}: running with {open_attempts} open attempts")
    if open_attempts > 1 and not in_round:
        problems.append(f"{slug}: {open_attempts} attempts open at once")
    bad = conn.execute(
        text(
            "SELECT count(*) FROM attempts WHERE task_id = :t AND "
            "(candidate < 1 OR candidate > candidates OR (round IS NULL AND candidates != 1))"
        ),
        {"t": task_id},
    ).scalar_one()
    if bad:
        problems.append(f"{slug}: {bad} attempts with a slot outside their round")
    decisions = conn.execute(
        text(
            "SELECT a.stage, a.round, count(*) FROM transitions t JOIN attempts a "
            "ON a.id = t.attempt_id WHERE a.task_id = :t AND a.round IS NOT NULL "
            "AND t.event != 'claim' GROUP BY a.stage, a.round HAVING count(*) > 1"
        ),
        {"t": task_id},
    ).all()
    for stage_name, round_no, count in decisions:
        problems.append(f"{slug}: round {round_no} at {stage_name} decided {count} times")
    return problems


def _start_commit_ok(value: str) -> bool:
    if value in ("pending", "none"):
        return True
    return len(value) in (40, 64) and all(c in "0123456789abcdef" for c in value)


def _edge_problem(before: str, after: str, event: str) -> str | None:
    try:
        source, target = parse_state(before), parse_state(after)
        ev = Event(event)
    except ValueError as exc:
        return f"unparseable edge {before} -> {after} ({event}): {exc}"
    kind = TRANSITIONS.get((source.status, ev))
    if kind is None:
        return f"illegal edge {before} -> {after} ({event})"
    if kind is Target.NEXT_STAGE:
        if target.stage == source.stage and target.status is Status.LANDING:
            return None  # the last stage passed in a pipeline that lands
        if target.stage == source.stage or target.status not in (Status.READY, Status.COMPLETE):
            return f"bad next-stage edge {before} -> {after}"
        return None
    if kind is Target.COMPLETE:  # landed
        return None if after == "complete" else f"bad landed edge {before} -> {after}"
    if kind is Target.MIGRATED:  # `migrate`: the same status, at any stage but complete
        if target.status is not source.status or target.stage == "complete":
            return f"bad migrate edge {before} -> {after}"
        return None
    if kind is Target.BACK_READY:  # `reject`, to its own stage or (--to) an earlier one
        if target.status is not Status.READY or target.stage == "complete":
            return f"bad reject edge {before} -> {after}"
        return None
    if target.stage != source.stage or target.status.value != kind.value:
        return f"edge {before} -> {after} does not match {event}"
    return None


def cli_json(result: Result) -> Any:
    assert result.exit_code == 0, (result.exit_code, result.output, result.stderr)
    return json.loads(result.stdout)


__all__: Sequence[str] = [
    "FAKES",
    "Project",
    "check_invariants",
    "cli_json",
    "copy_database",
    "make_project",
    "pg_server_url",
    "run_orchestrator",
    "write_config",
]


def git(cwd: Path, *args: str) -> str:
    """git as a tester runs it: no user config, a fixed identity; its stdout."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    env |= {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env |= {"GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(
        ["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True, env=env
    ).stdout


def make_repo(folder: Path) -> Path:
    """`folder/repo` on `main`: keep.txt, gone.txt and a .gitignore of *.log."""
    repo = folder / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "keep.txt").write_text("keep\n")
    (repo / "gone.txt").write_text("gone\n")
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    return repo
