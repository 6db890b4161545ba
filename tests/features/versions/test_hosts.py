"""Many hosts, one PostgreSQL database, different configs: a host claims a
task only when it holds the task's version (it loaded that version
itself); otherwise it leaves the task, and `explain` names the host that
holds it. Two real projects (two state folders) tick as two hosts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import Project, cli_json, make_project

PASS = ["sh", "-c", 'echo \'{"pass": true, "score": 1.0}\'']


def _stage(mark: str, on_change: str = "pin") -> str:
    worker = ["sh", "-c", f"echo {mark} > ran-by"]
    return (
        f'[pipelines.default]\non_change = "{on_change}"\n\n'
        f'[[pipelines.default.stages]]\nname = "work"\nworker = {json.dumps(worker)}\n'
        f"verifier = {json.dumps(PASS)}\n"
    )


@pytest.fixture
def shared_url(pg_url: str) -> str:
    from orchestrator.storage import migrate
    from orchestrator.storage.db import make_engine

    engine = make_engine(pg_url, create=True)
    migrate.upgrade(engine)
    engine.dispose()
    return pg_url


def _host(tmp_path: Path, url: str, name: str, stages: str) -> Project:
    project = make_project(tmp_path / name, url, stages, affinity="any")
    project.env["ORCHESTRATOR_HOST"] = name
    return project


def test_a_host_without_the_tasks_version_never_claims_it(tmp_path: Path, shared_url: str) -> None:
    a = _host(tmp_path, shared_url, "host-a", _stage("a"))
    b = _host(tmp_path, shared_url, "host-b", _stage("b"))
    assert a.run("add", "t1", "--title", "added on host-a").returncode == 0
    for _ in range(2):
        done = b.run("tick", timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    assert "t1: waits (this host does not hold pipeline version" in done.stderr
    assert a.state("t1") == "work"
    assert a.query("SELECT count(*) FROM attempts") == [(0,)]
    explained = cli_json(b.cli("explain", "t1", "--json"))["version"]
    assert explained["kept"] is False and explained["hosts"] == ["host-a"]
    assert a.run("tick", timeout=120).returncode == 0
    assert a.state("t1") == "complete"
    assert a.query("SELECT host FROM attempts") == [("host-a",)]


def test_an_upgrading_host_runs_its_own_config_for_a_compatible_version(
    tmp_path: Path, shared_url: str
) -> None:
    """What a host runs comes from its own disk: with `upgrade`, host-b moves
    host-a's task to host-b's version and runs its own worker."""
    a = _host(tmp_path, shared_url, "host-a", _stage("a"))
    b = _host(tmp_path, shared_url, "host-b", _stage("b", on_change="upgrade"))
    assert a.run("add", "t1", "--title", "added on host-a").returncode == 0
    assert b.run("tick", timeout=120).returncode == 0
    assert a.state("t1") == "complete"
    [(version, host)] = a.query("SELECT pipeline_version, host FROM attempts")
    assert host == "host-b"
    assert a.query("SELECT pipeline_version FROM tasks") == [(version,)]
