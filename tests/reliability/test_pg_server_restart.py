"""A private PostgreSQL server restarted, or stopped, under a running tick
(issue 17): a restart costs no attempt; only a server that stays down past
`reconnect_seconds` makes the tick give up (69), and then the next tick
records what the attempts finished instead of counting crashes.

The server is our own (initdb in a temporary folder, its own port and
socket folder), run as an unprivileged user when we are root, because
PostgreSQL refuses to run as root. Without initdb the tests skip, except
under CI=true, where they must run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e.e2e_support import agent, stage, wait_for
from reliability_support import audit_transitions, query, run, violations
from sqlalchemy import create_engine, text
from support import Project, make_project

from orchestrator.storage import migrate
from orchestrator.storage.db import make_engine

pytestmark = [pytest.mark.reliability, pytest.mark.pg]

NOBODY = 65534


def cannot(reason: str) -> None:
    """Skip with the reason; CI runs as root and must run these, never skip."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true forbids skipping: {reason}")
    pytest.skip(reason)


@dataclass
class Server:
    folder: Path
    port: int
    prefix: list[str]

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/orch"

    def pg_ctl(self, *args: str) -> None:
        done = subprocess.run(
            [*self.prefix, "pg_ctl", "-D", str(self.folder / "data"), "-w", "-t", "60", *args],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self.pg_ctl("-o", options, "-l", str(self.folder / "log"), "start")

    def restart(self) -> None:
        """A fast restart: the server ends every session, then comes back."""
        self.pg_ctl("-m", "fast", "-l", str(self.folder / "log"), "restart")

    def stop(self) -> None:
        self.pg_ctl("-m", "fast", "stop")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def server() -> Iterator[Server]:
    if shutil.which("initdb") is None or shutil.which("pg_ctl") is None:
        cannot("initdb and pg_ctl are not on PATH")
    prefix: list[str] = []
    # Not under pytest's tmp_path: its parents are closed to other users.
    folder = Path(tempfile.mkdtemp(prefix="orch-pg-"))
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            cannot("running PostgreSQL as root needs setpriv to drop to another user")
        prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
        os.chown(folder, NOBODY, NOBODY)
    made = subprocess.run(
        [
            *prefix,
            "initdb",
            "-D",
            str(folder / "data"),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--locale=C",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "LC_ALL": "C"},
    )
    if made.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        cannot(f"initdb failed: {made.stderr.strip()[-300:]}")
    found = Server(folder, free_port(), prefix)
    found.start()
    admin = create_engine(
        f"postgresql+psycopg://postgres@127.0.0.1:{found.port}/postgres",
        isolation_level="AUTOCOMMIT",
    )
    with admin.connect() as conn:
        conn.execute(text("CREATE DATABASE orch"))
    admin.dispose()
    engine = make_engine(found.url, create=True)
    migrate.upgrade(engine)
    engine.dispose()
    try:
        yield found
    finally:
        subprocess.run(
            [*prefix, "pg_ctl", "-D", str(folder / "data"), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(folder, ignore_errors=True)


def project_on(
    server: Server, folder: Path, release: Path, dump: Path, **settings: object
) -> Project:
    worker = agent("--dump", str(dump), "--wait-file", str(release))
    verifier = agent("--pass", "--score", "0.9")
    return make_project(
        folder,
        server.url,
        stage("research", worker=worker, verifier=verifier, gate=True),
        **settings,
    )


def started(dump: Path) -> int:
    """Workers that started (each writes a line at start, one at its end)."""
    if not dump.exists():
        return 0
    return sum(1 for line in dump.read_text().splitlines() if '"end"' not in line)


def outcomes(project: Project) -> list[tuple[str, int, str]]:
    return query(
        project.db_url,
        "SELECT t.slug, a.number, a.outcome FROM attempts a JOIN tasks t ON t.id = a.task_id "
        "ORDER BY t.slug, a.number",
    )


def assert_settled(project: Project, slugs: tuple[str, ...]) -> None:
    assert violations(project.db_url) == []
    audit = audit_transitions(project.db_url)
    assert audit.lost == [] and audit.duplicated == []
    states = query(project.db_url, "SELECT slug, stage, status FROM tasks ORDER BY slug")
    assert states == [(slug, "research", "awaiting_approval") for slug in slugs]


def test_server_restarted_while_attempts_run(server: Server, tmp_path: Path) -> None:
    """`--jobs 2`, both workers running: the server restarts (ending every
    session of the tick); the renewals and records reconnect. Nothing is
    `crashed`, nothing halts, each task ran once."""
    release, dump = tmp_path / "release", tmp_path / "dump.jsonl"
    project = project_on(server, tmp_path / "proj", release, dump, lease_seconds=6)
    slugs = ("t1", "t2")
    for slug in slugs:
        assert project.cli("add", slug, "--title", "restart").exit_code == 0
    tick = project.popen("tick", "--jobs", "2")
    try:
        wait_for(lambda: started(dump) == 2, timeout=30, what="both workers")
        server.restart()
        # Let a renewal meet the restart before the records do.
        wait_for(
            lambda: (
                query(
                    project.db_url,
                    "SELECT count(*) FROM attempts "
                    "WHERE lease_expires_at > started_at + interval '6 s'",
                )[0][0]
                == 2
            ),
            timeout=30,
            what="both leases renewed after the restart",
        )
    finally:
        release.touch()
        out, err = tick.communicate(timeout=90)
    assert tick.returncode == 0, out + err
    assert "Error" not in err, err
    assert outcomes(project) == [(slug, 1, "passed") for slug in slugs]
    assert_settled(project, slugs)


def test_server_restarted_inside_the_record_transaction(server: Server, tmp_path: Path) -> None:
    """The tick freezes inside the transaction recording a pass; the server
    restarts under it; thawed, it reconnects and records the attempt once."""
    release, dump = tmp_path / "release", tmp_path / "dump.jsonl"
    release.touch()
    project = project_on(server, tmp_path / "proj", release, dump)
    assert project.cli("add", "t1", "--title", "restart").exit_code == 0
    tick = project.popen("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": "inside_record_tx:stop"})
    try:
        wait_for(lambda: _state(tick.pid) == "T", timeout=30, what="the tick to freeze")
        server.restart()
    finally:
        os.kill(tick.pid, signal.SIGCONT)
        out, err = tick.communicate(timeout=90)
    assert tick.returncode == 0, out + err
    assert "Error" not in err, err
    assert outcomes(project) == [("t1", 1, "passed")]
    assert_settled(project, ("t1",))


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def test_server_down_past_the_bound_after_the_worker_finished(
    server: Server, tmp_path: Path
) -> None:
    """The server stops while the worker runs and stays down past
    `reconnect_seconds`: the tick gives up with 69 (temporary, not 78) and
    keeps the result; once the server is back, the next tick records it as
    the attempt's outcome: `passed`, not `crashed`."""
    release, dump = tmp_path / "release", tmp_path / "dump.jsonl"
    project = project_on(
        server, tmp_path / "proj", release, dump, reconnect_seconds=1, lease_seconds=600
    )
    assert project.cli("add", "t1", "--title", "down").exit_code == 0
    tick = project.popen("tick")
    try:
        wait_for(lambda: started(dump) == 1, timeout=30, what="the worker")
        server.stop()
    finally:
        release.touch()
        out, err = tick.communicate(timeout=90)
    assert tick.returncode == 69, out + err
    assert "Traceback" not in err and "cannot reach the database" in err, err
    kept = json.loads((project.dir / "state/t1/research-001/result.json").read_text())
    assert (kept["outcome"], kept["pass"], kept["database"]) == ("passed", True, True)

    server.start()
    after = run(project, "tick")
    assert after.returncode == 0, after.stderr
    rows = query(project.db_url, "SELECT number, outcome, score, late_result FROM attempts")
    assert rows == [(1, "passed", 0.9, None)]
    assert_settled(project, ("t1",))


def test_server_down_past_the_bound_while_the_worker_runs(server: Server, tmp_path: Path) -> None:
    """The server stays down past `reconnect_seconds` while the worker still
    runs: the tick stops it and exits 69; the next tick records the attempt
    as `database_error`, which counts toward nothing (not even the
    interrupt streak: `max_interrupts = 1` would halt the task), and runs
    the stage again."""
    release, dump = tmp_path / "release", tmp_path / "dump.jsonl"
    project = project_on(
        server,
        tmp_path / "proj",
        release,
        dump,
        reconnect_seconds=1,
        lease_seconds=3,
        max_interrupts=1,
    )
    assert project.cli("add", "t1", "--title", "down").exit_code == 0
    tick = project.popen("tick")
    try:
        wait_for(lambda: started(dump) == 1, timeout=30, what="the worker")
        server.stop()
        out, err = tick.communicate(timeout=90)
    finally:
        if tick.poll() is None:
            tick.kill()
            tick.communicate()  # reaped: no process outlives its test
    assert tick.returncode == 69, out + err
    assert "Traceback" not in err, err
    kept = json.loads((project.dir / "state/t1/research-001/result.json").read_text())
    assert (kept["outcome"], kept["database"]) == ("database_error", True)

    server.start()
    release.touch()
    after = run(project, "tick")
    assert after.returncode == 0, after.stderr
    assert outcomes(project) == [("t1", 1, "database_error"), ("t1", 2, "passed")]
    assert_settled(project, ("t1",))


def test_run_waits_out_a_server_that_is_down(server: Server, tmp_path: Path) -> None:
    """`run` is a daemon: a database out of reach is said on stderr each
    round, and once the server is back the next tick does the work."""
    release, dump = tmp_path / "release", tmp_path / "dump.jsonl"
    release.touch()
    project = project_on(server, tmp_path / "proj", release, dump, reconnect_seconds=1)
    assert project.cli("add", "t1", "--title", "down").exit_code == 0
    server.stop()
    errors = tmp_path / "stderr"
    with errors.open("w") as err_file:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "run", "--interval", "0.1"],
            cwd=project.dir,
            env=project.process_env(),
            stdout=subprocess.DEVNULL,
            stderr=err_file,
            start_new_session=True,
        )
    try:
        wait_for(
            lambda: errors.read_text().count("cannot reach the database") >= 2,
            timeout=30,
            what="two rounds that could not reach the server",
        )
        assert daemon.poll() is None, errors.read_text()
        server.start()
        wait_for(
            lambda: query(project.db_url, "SELECT status FROM tasks") == [("awaiting_approval",)],
            timeout=60,
            what="t1 at its gate",
        )
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    err = errors.read_text()
    assert daemon.returncode == 0, err
    assert "Traceback" not in err, err
    assert outcomes(project) == [("t1", 1, "passed")]
