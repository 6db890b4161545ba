"""Database faults through the real CLI (SQLite).

Each case runs `list`, `tick` or `approve` as a real process against a broken
database and requires the documented exit status (docs/reference/exit-status.md), exactly one
`Error: ...` line on stderr and no traceback, and no partial write: a
missing file is not created, a damaged one is left byte for byte as it was,
and rows committed before the fault are intact afterwards.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from reliability_report import DB_FAULTS, ProjectFactory
from reliability_support import (
    CRASH_RC,
    clone_project,
    crash_env,
    file_digest,
    one_error_line,
    run,
    sqlite_file,
    table_counts,
    violations,
)
from support import Project

pytestmark = [pytest.mark.reliability, pytest.mark.lane(DB_FAULTS)]

COMMANDS = {"list": ("list",), "tick": ("tick",), "approve": ("approve", "t1")}


@pytest.fixture
def project(new_project: ProjectFactory) -> Project:
    """t1 waits at a gate (approve has work), t2 is ready (tick has work)."""
    made = new_project()
    assert made.cli("add", "t1", "--title", "gated").exit_code == 0
    assert made.cli("tick").exit_code == 0
    assert made.cli("add", "t2", "--title", "ready").exit_code == 0
    assert made.state("t1") == "research:awaiting_approval"
    db = sqlite_file(made.db_url)
    wal = Path(f"{db}-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # all of it is in the main file
    return made


def assert_clean_error(result: subprocess.CompletedProcess[str], status: int, *words: str) -> str:
    line = one_error_line(result.stderr)
    assert result.returncode == status, (result.returncode, result.stderr)
    assert line is not None, f"not one `Error:` line: {result.stderr!r}"
    for word in words:
        assert word in line, (word, line)
    return line


# -- the file is missing, empty, overwritten or cut short ---------------------------------


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_missing_database_is_not_created(project: Project, command: str) -> None:
    missing = project.dir / "gone" / "orchestrator.db"
    project.db_url = f"sqlite:///{missing}"
    result = run(project, *COMMANDS[command])
    assert_clean_error(result, 78, "not found", str(missing))
    assert not missing.parent.exists()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_empty_database_file(project: Project, command: str) -> None:
    empty = project.dir / "empty.db"
    empty.touch()
    project.db_url = f"sqlite:///{empty}"
    result = run(project, *COMMANDS[command])
    assert_clean_error(result, 78, "db upgrade")
    assert empty.stat().st_size == 0
    assert not Path(f"{empty}-wal").exists() or Path(f"{empty}-wal").stat().st_size == 0


def overwrite_header(db: Path) -> None:
    with db.open("r+b") as handle:
        handle.write(b"garbage!garbage!")


def truncate_half(db: Path) -> None:
    os.truncate(db, db.stat().st_size // 2)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("damage", [overwrite_header, truncate_half], ids=["header", "truncated"])
def test_damaged_database(project: Project, command: str, damage: Callable[[Path], None]) -> None:
    db = sqlite_file(project.db_url)
    damage(db)
    digest = file_digest(db)
    result = run(project, *COMMANDS[command])
    assert_clean_error(result, 74, "database")
    assert file_digest(db) == digest  # never "repaired" or re-initialised


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_schema_from_the_future(project: Project, command: str) -> None:
    db = sqlite_file(project.db_url)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'ffff'")
    conn.close()
    before = table_counts(project.db_url)
    digest = file_digest(db)
    result = run(project, *COMMANDS[command])
    assert_clean_error(result, 78, "ffff", "newer")
    assert table_counts(project.db_url) == before
    assert file_digest(db) == digest


# -- another writer holds the database past busy_timeout ----------------------------------


@pytest.mark.parametrize("command", ["tick", "approve", "add"])
def test_writer_held_past_busy_timeout(project: Project, command: str) -> None:
    text = project.config.read_text().replace(
        "[orchestrator]\n", "[orchestrator]\nbusy_timeout = 1\n"
    )
    project.config.write_text(text)
    args = ("add", "t3", "--title", "late") if command == "add" else COMMANDS[command]
    before = table_counts(project.db_url)
    states = (project.state("t1"), project.state("t2"))
    holder = sqlite3.connect(sqlite_file(project.db_url), isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        result = run(project, *args)
    finally:
        holder.rollback()
        holder.close()
    assert_clean_error(result, 69, "busy")
    assert table_counts(project.db_url) == before
    assert (project.state("t1"), project.state("t2")) == states
    assert violations(project.db_url) == []
    again = run(project, *args)  # the writer is gone: the same command works
    assert again.returncode == 0, again.stderr
    assert violations(project.db_url) == []


# -- disk full (RLIMIT_FSIZE; SIGXFSZ ignored so writes fail with EFBIG) --------------------


def file_size_limit(limit: int) -> Callable[[], None]:
    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return preexec


# Room for the 32 KiB WAL index (-shm), so the database opens, and for 7 WAL
# frames (32 + 7 * 4120 bytes), less than any of these commands writes.
NO_ROOM = 32768 + 100


@pytest.mark.parametrize("command", ["add", "tick", "approve"])
def test_disk_full_writes_nothing(project: Project, command: str, tmp_path: Path) -> None:
    body = tmp_path / "body.txt"
    body.write_text("x" * 1_000_000)
    args = {
        "add": ("add", "t3", "--title", "big", "--body-file", str(body)),
        "tick": ("tick",),
        # An approval alone fits in 7 WAL frames; an 8 KiB note does not.
        "approve": ("approve", "t1", "--note", "n" * 8000),
    }[command]
    before = table_counts(project.db_url)
    states = (project.state("t1"), project.state("t2"))
    result = run(project, *args, preexec_fn=file_size_limit(NO_ROOM))
    assert_clean_error(result, 74, "database")
    assert table_counts(project.db_url) == before
    assert (project.state("t1"), project.state("t2")) == states
    assert violations(project.db_url) == []
    assert run(project, *args).returncode == 0  # room again: the same command works
    assert violations(project.db_url) == []


def test_disk_fills_up_during_an_attempt(project: Project, tmp_path: Path) -> None:
    """The claim fits, the record does not: the tick exits 74 with the attempt
    open; the next tick (with room) closes it as crashed and runs it again."""
    probe = clone_project(project, tmp_path / "probe")
    died = run(probe, "tick", env=crash_env("after_claim_commit"))
    assert died.returncode == CRASH_RC
    claim_bytes = Path(f"{sqlite_file(probe.db_url)}-wal").stat().st_size
    before = table_counts(project.db_url)
    result = run(project, "tick", preexec_fn=file_size_limit(claim_bytes + 100))
    assert_clean_error(result, 74, "database")
    assert table_counts(project.db_url)["transitions"] == before["transitions"] + 1  # the claim
    assert project.state("t2") == "research:running"
    assert violations(project.db_url, allow_running=True) == []
    assert run(project, "tick").returncode == 0
    assert violations(project.db_url) == []
    assert project.state("t2") == "research:awaiting_approval"


# -- a read-only database, for an unprivileged user ------------------------------------


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A folder under /tmp that the unprivileged user can reach (pytest's own
    tmp folders are private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="orch-ro-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


DROP = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


# What `orchestrator list/tick/approve` import; copied where nobody can read them.
NOBODY_PACKAGES = ("orchestrator", "click", "sqlalchemy", "filelock", "typing_extensions")


def _world_readable_packages() -> Path:
    """A copy of the packages the CLI needs, in a folder nobody may read: the
    checkout and its virtualenv may sit below a folder only root can enter
    (a clone in a `mktemp -d` folder, a venv under /root)."""
    root = Path(tempfile.mkdtemp(prefix="orch-nobody-", dir="/tmp"))
    atexit.register(shutil.rmtree, root, True)
    for name in NOBODY_PACKAGES:
        source = Path(importlib.import_module(name).__file__ or "")
        if source.name == "__init__.py":
            shutil.copytree(
                source.parent, root / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(source, root / source.name)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


@functools.cache
def _nobody_python() -> list[str] | str:
    """argv prefix that runs `orchestrator` as nobody, or why we cannot."""
    if shutil.which("setpriv") is None:
        return "dropping privileges needs setpriv"
    # The virtualenv's interpreter may live under /root, which nobody may not
    # enter; a system interpreter of the same version loads the same packages.
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not system.exists():
        return f"no {system} to run as nobody"
    packages = _world_readable_packages()
    boot = (
        f"import sys; sys.path.insert(0, {str(packages)!r}); "
        "from orchestrator.cli import main; main(sys.argv[1:])"
    )
    prefix = [*DROP, str(system), "-s", "-c", boot]
    probe = subprocess.run(
        [*prefix, "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    if probe.returncode != 0:
        return f"nobody cannot run the orchestrator: {probe.stderr.strip()[-200:]}"
    return prefix


def unprivileged(args: tuple[str, ...]) -> list[str]:
    """`orchestrator ARGS` run as `nobody` (as root), or as we are (unprivileged)."""
    if os.geteuid() != 0:
        return [sys.executable, "-m", "orchestrator", *args]
    prefix = _nobody_python()
    if isinstance(prefix, str):
        pytest.skip(prefix)
    return [*prefix, *args]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_read_only_database(project: Project, command: str, world_dir: Path) -> None:
    home = world_dir / "project"  # root's, 755: readable, not writable, by nobody
    shutil.copytree(project.dir, home)
    writable = world_dir / "rw"  # lock, state and workspaces stay writable
    writable.mkdir(mode=0o777)
    writable.chmod(0o777)
    config = home / "orchestrator.toml"
    text = config.read_text()
    for key in ("workspace_root", "state_root", "lock_file"):
        text = text.replace(f'{key} = "', f'{key} = "{writable}/')
    config.write_text(text)
    for path in [home, *home.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    db = home / "orchestrator.db"
    digest = file_digest(db)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    env.update(ORCHESTRATOR_CONFIG=str(config), ORCHESTRATOR_DB_URL=f"sqlite:///{db}", HOME="/tmp")
    result = subprocess.run(
        unprivileged(COMMANDS[command]),
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert_clean_error(result, 77, "database")
    assert file_digest(db) == digest
    assert sorted(p.name for p in home.iterdir()) == sorted(p.name for p in project.dir.iterdir())


# -- the schema in the file is damaged or drifted -----------------------------------------


def corrupt_schema_text(db: Path) -> None:
    """A byte of the `tasks` DDL in sqlite_master becomes a non-UTF-8 byte: SQLite
    reports "malformed database schema ... near <that byte>", a message the
    sqlite3 module cannot decode (UnicodeDecodeError, not a DatabaseError)."""
    data = db.read_bytes()
    needle = b"\tstatus VARCHAR(32) NOT NULL,"
    assert data.count(needle) == 1
    db.write_bytes(data.replace(needle, needle[:-1] + b"\xd3"))


def rename_a_column(db: Path) -> None:
    """Schema drift: someone renamed a column by hand; alembic_version still says head."""
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE tasks RENAME COLUMN hint_source TO hint_src")
    conn.close()


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    "damage", [corrupt_schema_text, rename_a_column], ids=["undecodable-ddl", "renamed-column"]
)
def test_damaged_schema(project: Project, command: str, damage: Callable[[Path], None]) -> None:
    """Exit 74 (corrupt) or 78 (schema not what this code needs), one line, no
    traceback, nothing written; never `sqlite3.OperationalError: no such column`
    or a UnicodeDecodeError traceback with exit 1."""
    db = sqlite_file(project.db_url)
    damage(db)
    digest = file_digest(db)
    result = run(project, *COMMANDS[command])
    if command == "list" and result.returncode == 0:
        return  # `list` may not touch the damaged part; that is a clean pass
    assert result.returncode in (74, 78), (result.returncode, result.stderr[-600:])
    assert one_error_line(result.stderr) is not None, result.stderr[-600:]
    assert file_digest(db) == digest
