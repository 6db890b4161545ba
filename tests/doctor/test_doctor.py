"""`orchestrator doctor`: ok on a healthy project, warn and fail where it should."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support import Project, copy_database, make_project

from orchestrator import doctor
from orchestrator.doctor import folders as doctor_folders
from orchestrator.locking import TickLock
from orchestrator.storage import repo, schema
from orchestrator.storage.db import make_engine, write_tx

STAGES_WITH = """
[[pipelines.default.stages]]
name = "implement"
worker = [{worker}]
verifier = ["sh", "-c", "echo '{{\\"pass\\": true}}'"]
{extra}
"""


@pytest.fixture
def sqlite_project(tmp_path: Path, template_db: Path) -> Project:
    url = copy_database(template_db, tmp_path / "proj" / "orchestrator.db")
    return make_project(tmp_path / "proj", url)


def lines(project: Project) -> tuple[int, list[str]]:
    result = project.cli("doctor")
    return result.exit_code, result.stdout.splitlines()


def levels(output: list[str], name: str) -> list[str]:
    return [line.split()[0] for line in output if line.split()[1:2] == [name]]


def test_healthy_project(project: Project) -> None:
    code, out = lines(project)
    assert code == 0, out
    assert not [line for line in out if line.startswith("fail")]
    for name in ("config", "database", "lock", "attempts", "command", "folders"):
        assert "ok" in levels(out, name), (name, out)
    assert out[-1].startswith("0 failed")


def test_sqlite_specific_checks(sqlite_project: Project) -> None:
    code, out = lines(sqlite_project)
    assert code == 0, out
    assert any(line.startswith("ok    journal") and "wal" in line for line in out)
    assert any(line.startswith("ok    integrity") for line in out)
    assert any(f"at revision {schema.HEAD} (head)" in line for line in out)


def test_missing_binary_fails(sqlite_project: Project) -> None:
    sqlite_project.write_config(STAGES_WITH.format(worker='"no-such-agent-xyz"', extra=""))
    code, out = lines(sqlite_project)
    assert code == 1
    assert any(line.startswith("fail  command") and "no-such-agent-xyz" in line for line in out), (
        out
    )


def test_missing_script_argument_and_prompt_fail(sqlite_project: Project, tmp_path: Path) -> None:
    gone = tmp_path / "gone" / "judge.py"
    sqlite_project.write_config(
        STAGES_WITH.format(
            worker=f'"sh", "{gone}"', extra='prompt = "prompts/none.md"\nstdin = "prompt"'
        )
    )
    code, out = lines(sqlite_project)
    assert code == 1
    assert any(line.startswith("fail  command") and str(gone) in line for line in out)
    assert any(line.startswith("fail  prompts") and "none.md" in line for line in out)


def test_relative_command_path_warns(sqlite_project: Project) -> None:
    (sqlite_project.dir / "bin").mkdir()
    script = sqlite_project.dir / "bin" / "agent"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    sqlite_project.write_config(STAGES_WITH.format(worker='"bin/agent"', extra=""))
    code, out = lines(sqlite_project)
    assert code == 0
    assert any(line.startswith("warn  command") and "write it absolute" in line for line in out), (
        out
    )


def test_database_missing_fails(sqlite_project: Project) -> None:
    Path(sqlite_project.db_url.removeprefix("sqlite:///")).unlink()
    code, out = lines(sqlite_project)
    assert code == 1
    assert any(line.startswith("fail  database") and "not found" in line for line in out)


def test_database_not_at_head_fails(sqlite_project: Project) -> None:
    path = Path(sqlite_project.db_url.removeprefix("sqlite:///"))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    conn.close()
    code, out = lines(sqlite_project)
    assert code == 1
    assert any(line.startswith("fail  database") and "9999" in line for line in out), out

    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM alembic_version")
    conn.close()
    code, out = lines(sqlite_project)
    assert code == 1
    assert any(line.startswith("fail  database") and "db upgrade" in line for line in out), out


def test_corrupt_database_header_fails(sqlite_project: Project) -> None:
    path = Path(sqlite_project.db_url.removeprefix("sqlite:///"))
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    data = bytearray(path.read_bytes())
    data[:16] = b"this is no db!!\x00"
    path.write_bytes(bytes(data))
    code, out = lines(sqlite_project)
    assert code == 1
    assert any(line.startswith("fail  database") and "unreadable" in line for line in out), out


def test_bad_config_exits_78(sqlite_project: Project) -> None:
    sqlite_project.config.write_text("[orchestrator]\nlease_secnds = 5\n")
    code, out = lines(sqlite_project)
    assert code == 78
    assert out[0].startswith("fail  config") and "lease_secnds" in out[0]


def test_missing_config_exits_78(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from orchestrator.cli import cli

    result = CliRunner().invoke(
        cli, ["--config", str(tmp_path / "none.toml"), "doctor"], env={"ORCHESTRATOR_DB_URL": None}
    )
    assert result.exit_code == 78
    assert "not found" in result.stdout


def test_lock_in_a_temporary_folder_warns(sqlite_project: Project, tmp_path: Path) -> None:
    # tmp_path is under the temporary folder, so any lock there earns the warning
    code, out = lines(sqlite_project)
    assert code == 0
    assert any(line.startswith("warn  lock") and "temporary folder" in line for line in out)


def test_lock_outside_temporary_folders_does_not_warn(
    sqlite_project: Project, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(doctor_folders, "TEMP_FOLDERS", ())
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "elsewhere"))
    code, out = lines(sqlite_project)
    assert code == 0
    assert levels(out, "lock") == ["ok"]
    assert doctor._in_temp_folder(Path("/tmp/x.lock")) is False
    monkeypatch.setattr(doctor_folders, "TEMP_FOLDERS", ("/tmp",))
    assert doctor._in_temp_folder(Path("/tmp/sub/x.lock")) is True


def test_held_lock_names_its_holder(sqlite_project: Project) -> None:
    lock = TickLock(sqlite_project.dir / "orchestrator.lock")
    with lock:
        code, out = lines(sqlite_project)
    assert code == 0
    assert any(line.startswith("ok    lock") and "held by pid" in line for line in out), out


def test_expired_lease_warns(sqlite_project: Project) -> None:
    assert sqlite_project.cli("add", "t1", "--title", "T").exit_code == 0
    engine = make_engine(sqlite_project.db_url)
    past = datetime.now(UTC) - timedelta(hours=1)
    try:
        with write_tx(engine) as conn:
            task = repo.get_task(conn, "t1")
            assert task is not None
            repo.open_attempt(
                conn,
                task_id=task.id,
                stage=task.stage,
                run=1,
                number=1,
                hint="",
                tick_id=None,
                lease_token="t" * 32,
                lease_expires_at=past,
                host="elsewhere",
                boot_id="b",
                tick_pid=1,
                tick_start=None,
                started_at=past,
            )
    finally:
        engine.dispose()
    code, out = lines(sqlite_project)
    assert code == 0
    assert any(line.startswith("warn  attempts") and "expired" in line for line in out), out


def test_command_check_cases(tmp_path: Path) -> None:
    ok = doctor.command_check("w", ("sh", "-c", "true"), tmp_path)
    assert ok.level is doctor.Level.OK
    templated = doctor.command_check("w", ("{workspace}/run",), tmp_path)
    assert templated.level is doctor.Level.WARN
    missing_abs = doctor.command_check("w", (str(tmp_path / "nope"),), tmp_path)
    assert missing_abs.level is doctor.Level.FAIL
