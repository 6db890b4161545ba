"""Faults of the host, not of the task: a lock file, workspace or state folder
on a read-only, full or unwritable filesystem, through the real CLI.

Each case mounts a small tmpfs (root only) or drops to an unprivileged user,
and requires the documented exit status (77 for permission or a read-only
filesystem, 74 for a full disk or an I/O error), one `Error: ...` line that
names the file or folder, no traceback, no attempt charged to the task, and
no litter left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from reliability_report import ProjectFactory
from reliability_support import one_error_line, sqlite_file
from reliability_support import run as run_any
from support import Project

pytestmark = [pytest.mark.reliability]


def run(project: Project, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter: a full disk or a missing folder must meet the
    program's real start-up, not a fork that has everything loaded already."""
    return run_any(project, *args, fresh=True, **kwargs)


def cannot(reason: str) -> None:
    """Skip with the reason; CI runs as root and must run these, never skip."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true forbids skipping: {reason}")
    pytest.skip(reason)


Mount = Callable[..., Path]


@pytest.fixture
def small_fs() -> Iterator[Mount]:
    """`small_fs(size="1m", inodes=None, read_only=False)`: a fresh tmpfs in a
    folder under /tmp (pytest's own folders are private to root, and the
    unprivileged user must reach these), unmounted afterwards."""
    if os.geteuid() != 0:
        cannot("mounting a tmpfs needs root")
    if shutil.which("mount") is None:
        cannot("no mount(8)")
    made: list[Path] = []

    def mount(size: str = "1m", inodes: int | None = None, read_only: bool = False) -> Path:
        folder = Path(tempfile.mkdtemp(prefix="orch-fs-", dir="/tmp"))
        made.append(folder)
        options = f"size={size},mode=0777" + (f",nr_inodes={inodes}" if inodes else "")
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            cannot(f"cannot mount a tmpfs: {done.stderr.strip()}")
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        return folder

    yield mount
    for folder in reversed(made):
        subprocess.run(["umount", "-l", str(folder)], check=False)
        with contextlib.suppress(OSError):
            folder.rmdir()


def fill(folder: Path) -> None:
    """Use up every block of a small filesystem (its inodes stay free)."""
    # Unbuffered: a buffer left to flush at close would raise there, past the suppress.
    with (folder / "filler").open("wb", buffering=0) as out:
        with contextlib.suppress(OSError):
            while out.write(b"\0" * 65536):
                pass
        with contextlib.suppress(OSError):
            while out.write(b"\0" * 512):  # the last partial blocks
                pass


def usage(folder: Path) -> dict[str, int]:
    """Each file's size under `folder`: what filled a disk that should not be."""
    return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*") if p.is_file()}


def use_up_inodes(folder: Path) -> None:
    """Use up every inode, so no file can be created (blocks stay free)."""
    with contextlib.suppress(OSError):
        for n in range(10_000):
            (folder / f"inode{n}").touch()


def clean_error(result: subprocess.CompletedProcess[str], status: int, *words: str) -> str:
    line = one_error_line(result.stderr)
    assert result.returncode == status, (result.returncode, result.stderr[-2000:])
    assert line is not None, f"not one `Error:` line: {result.stderr[-2000:]!r}"
    for word in words:
        assert word in line, (word, line)
    return line


# -- 1. the lock file -------------------------------------------------------------------

LOCK_COMMANDS = {
    "tick": ("tick",),
    "tick-q": ("tick", "-q"),
    "db-upgrade": ("db", "upgrade"),
    "run": ("run", "--interval", "0.1"),
}


@pytest.mark.parametrize("command", sorted(LOCK_COMMANDS))
@pytest.mark.parametrize(
    ("fault", "status", "reason"),
    [("read-only", 77, "Read-only file system"), ("no-inodes", 74, "No space left on device")],
)
def test_lock_file_on_a_broken_filesystem(
    new_project: ProjectFactory,
    small_fs: Mount,
    command: str,
    fault: str,
    status: int,
    reason: str,
) -> None:
    if fault == "read-only":
        folder = small_fs(read_only=True)
    else:
        folder = small_fs(inodes=2)
        use_up_inodes(folder)
    lock = folder / "orchestrator.lock"
    project = new_project(lock_file=str(lock))
    assert project.cli("add", "t1", "--title", "x").exit_code == 0
    before = project.counts()
    result = run(project, *LOCK_COMMANDS[command], timeout=60)
    clean_error(result, status, str(lock), reason)
    assert project.counts() == before  # nothing claimed, no tick row
    assert project.state("t1") == "research"


@pytest.mark.parametrize(
    ("fault", "reason"),
    [("read-only", "Read-only file system"), ("no-inodes", "No space left on device")],
)
def test_doctor_fails_the_lock_check_without_a_traceback(
    new_project: ProjectFactory, small_fs: Mount, fault: str, reason: str
) -> None:
    if fault == "read-only":
        folder = small_fs(read_only=True)
    else:
        folder = small_fs(inodes=2)
        use_up_inodes(folder)
    project = new_project(lock_file=str(folder / "orchestrator.lock"))
    result = run(project, "doctor")
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr + result.stdout
    fails = [line for line in result.stdout.splitlines() if line.startswith("fail  lock")]
    assert len(fails) == 1 and reason in fails[0], result.stdout


def test_verbose_shows_the_cause(new_project: ProjectFactory, small_fs: Mount) -> None:
    folder = small_fs(read_only=True)
    project = new_project(lock_file=str(folder / "orchestrator.lock"))
    result = run(project, "-v", "tick")
    assert result.returncode == 77
    assert "caused by OSError: [Errno 30] Read-only file system" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


# -- 4. litter: holder notes ---------------------------------------------------------------


def test_full_disk_leaves_no_holder_note_litter(
    new_project: ProjectFactory, small_fs: Mount
) -> None:
    """The lock file exists (an inode), the disk is full: the tick still runs
    (the holder note is a courtesy), and no 0-byte `<lock>.holder.<pid>` is
    left per tick."""
    folder = small_fs()
    lock = folder / "orchestrator.lock"
    lock.touch()
    fill(folder)
    project = new_project(lock_file=str(lock))
    for _ in range(3):
        result = run(project, "tick")
        assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(p.name for p in folder.iterdir()) == ["filler", "orchestrator.lock"]


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 120) -> None:
    """Poll a file or row until it shows up (never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


BLOCKING = """
[[pipelines.default.stages]]
name = "w"
worker = ["sh", "-c", "touch @/started-{task}; until [ -e @/go-{task} ]; do sleep .02; done"]
verifier = ["sh", "-c", "echo '{\\"pass\\": true, \\"score\\": 1.0}'"]
"""


def test_release_keeps_a_newer_ticks_holder_note(
    new_project: ProjectFactory, tmp_path: Path
) -> None:
    """The documented lock-deletion case: a cleaner deletes the lock file
    while tick A holds it, tick B takes a new one. A's release must not
    delete B's holder note (B's busy message would say "holder unknown")."""
    root = tmp_path / "signals"
    root.mkdir()
    project = new_project(stages=BLOCKING.replace("@", str(root)))
    for slug in ("a", "b"):
        assert project.cli("add", slug, "--title", slug).exit_code == 0
    lock = project.dir / "orchestrator.lock"
    holder = lock.with_name(lock.name + ".holder")
    first = project.popen("tick", "--task", "a")
    try:
        wait_until((root / "started-a").exists, "tick A's worker")
        assert str(first.pid) in holder.read_text()
        lock.unlink()  # the cleaner
        second = project.popen("tick", "--task", "b")
        try:
            wait_until((root / "started-b").exists, "tick B's worker")
            assert f'"pid": {second.pid}' in holder.read_text()
            (root / "go-a").touch()
            out, err = first.communicate(timeout=60)
            assert first.returncode == 0, (out, err)
            assert holder.exists(), "tick A removed tick B's holder note"
            assert f'"pid": {second.pid}' in holder.read_text()
            (root / "go-b").touch()
            out, err = second.communicate(timeout=60)
            assert second.returncode == 0, (out, err)
            assert not holder.exists()  # B removed its own note
        finally:
            (root / "go-b").touch()
            second.communicate(timeout=60)
    finally:
        (root / "go-a").touch()
        first.communicate(timeout=60)


# -- 3. a full, read-only or unwritable workspace or state folder --------------------------

# Two ready tasks, a stage that spends attempts fast: max_attempts 2, and
# max_interrupts is 3 by default; a host fault charged to the task would
# halt it within four ticks.
STAGES = """
[[pipelines.default.stages]]
name = "research"
gate = true
max_attempts = 2
worker = ["true"]
verifier = ["sh", "-c", "echo '{\\"pass\\": true, \\"score\\": 0.9}'"]
"""

FAULTY_TICKS = 4


def attempts_of(project: Project) -> list[tuple[str, str | None, str | None]]:
    return [
        (slug, outcome, error)
        for slug, outcome, error in project.query(
            "SELECT t.slug, a.outcome, a.error FROM attempts a JOIN tasks t ON t.id = a.task_id "
            "ORDER BY a.id"
        )
    ]


def assert_host_fault_spends_nothing(
    project: Project,
    tick: Callable[[], subprocess.CompletedProcess[str]],
    status: int,
    words: tuple[str, ...],
    repair: Callable[[], None],
) -> None:
    """Each faulty tick claims one attempt, records it `host_error` (the
    task is ready again, nothing halts), stops claiming and exits `status`
    with one line naming the folder; once repaired, the task goes on."""
    for n in range(1, FAULTY_TICKS + 1):
        result = tick()
        clean_error(result, status, *words)
        assert "Traceback" not in result.stdout
        rows = attempts_of(project)
        assert len(rows) == n, rows  # stopped claiming: t2 was never claimed
        assert {outcome for _, outcome, _ in rows} == {"host_error"}, rows
        assert all(words[0] in (error or "") for _, _, error in rows), rows
        assert project.state("t1") == "research", project.state("t1")
        assert project.state("t2") == "research"
    assert project.query("SELECT count(*) FROM ticks WHERE exit_code = :s", s=status) == [
        (FAULTY_TICKS,)
    ]
    repair()
    result = tick()
    assert result.returncode == 0, result.stderr[-2000:]
    assert project.state("t1") == "research:awaiting_approval"
    assert project.state("t2") == "research:awaiting_approval"


def host_project(new_project: ProjectFactory, **settings: str) -> Project:
    project = new_project(stages=STAGES, **settings)
    for slug in ("t1", "t2"):
        assert project.cli("add", slug, "--title", slug).exit_code == 0
    return project


@pytest.mark.parametrize("key", ["workspace_root", "state_root"])
def test_read_only_folder(new_project: ProjectFactory, small_fs: Mount, key: str) -> None:
    folder = small_fs(read_only=True)
    project = host_project(new_project, **{key: str(folder)})

    def repair() -> None:
        subprocess.run(["mount", "-o", "remount,rw", str(folder)], check=True)

    assert_host_fault_spends_nothing(
        project,
        lambda: run(project, "tick"),
        77,
        (f"{key} {folder}", "Read-only file system"),
        repair,
    )


@pytest.mark.parametrize("key", ["workspace_root", "state_root"])
def test_folder_out_of_inodes(new_project: ProjectFactory, small_fs: Mount, key: str) -> None:
    folder = small_fs(inodes=64)
    use_up_inodes(folder)
    project = host_project(new_project, **{key: str(folder)})

    def repair() -> None:
        for path in folder.glob("inode*"):
            path.unlink()

    assert_host_fault_spends_nothing(
        project,
        lambda: run(project, "tick"),
        74,
        (f"{key} {folder}", "No space left on device"),
        repair,
    )


@pytest.mark.parametrize("verifier", ["quick", "slow"])
def test_state_folder_on_a_full_disk(
    new_project: ProjectFactory, small_fs: Mount, verifier: str
) -> None:
    """Folders can still be made (tmpfs inodes are free), but the verifier's
    captured output cannot be written: the capture file stops where the disk
    is full, the attempt is recorded with its verdict and the error (issue
    17: the work is not thrown away), and the tick claims no more and exits
    74 naming the folder. A verifier slow enough to get a process note (past
    10 ms) ends the same way: the note that cannot be written is noted too,
    and the command, already running, goes on (recovery finds it by its tag)."""
    folder = small_fs()
    fill(folder)
    stages = (
        STAGES
        if verifier == "quick"
        else STAGES.replace('["sh", "-c", "', '["sh", "-c", "sleep 0.3; ')
    )
    project = new_project(stages=stages, state_root=str(folder))
    for slug in ("t1", "t2"):
        assert project.cli("add", slug, "--title", slug).exit_code == 0
    result = run(project, "tick")
    clean_error(result, 74, f"state_root {folder}", "No space left on device")
    rows = attempts_of(project)
    assert [(slug, outcome) for slug, outcome, _ in rows] == [("t1", "passed")], rows
    assert "verifier output not fully captured" in (rows[0][2] or ""), rows
    assert "No space left on device" in (rows[0][2] or ""), rows
    if verifier == "slow":
        assert "process note not written" in (rows[0][2] or ""), rows
    assert project.state("t1") == "research:awaiting_approval"
    assert project.state("t2") == "research"  # stopped claiming
    (folder / "filler").unlink()
    again = run(project, "tick")
    assert again.returncode == 0, again.stderr[-2000:]
    assert project.state("t2") == "research:awaiting_approval"


@pytest.mark.parametrize("key", ["workspace_root", "state_root"])
def test_folder_the_user_cannot_write(new_project: ProjectFactory, key: str) -> None:
    """As an unprivileged user (nobody, when we are root) whose project is
    writable but whose `tasks/` or `state/` is root's."""
    from test_db_faults import unprivileged

    source = host_project(new_project)
    world = Path(tempfile.mkdtemp(prefix="orch-user-", dir="/tmp"))
    try:
        world.chmod(0o755)
        home = world / "project"
        shutil.copytree(source.dir, home)
        db = home / "orchestrator.db"
        project = Project(dir=home, db_url=f"sqlite:///{db}", config=home / "orchestrator.toml")
        folder = home / ("tasks" if key == "workspace_root" else "state")
        folder.mkdir(exist_ok=True)  # `add` keeps the pipeline's version in state/
        if os.geteuid() == 0:
            shutil.chown(home, 65534, 65534)
            for path in home.iterdir():
                shutil.chown(path, 65534, 65534)
            shutil.chown(folder, 0, 0)
        folder.chmod(0o555)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
        env.update(
            ORCHESTRATOR_CONFIG=str(project.config), ORCHESTRATOR_DB_URL=project.db_url, HOME="/tmp"
        )

        def tick() -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                unprivileged(("tick",)),
                cwd=home,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )

        def repair() -> None:
            folder.chmod(0o777)

        assert_host_fault_spends_nothing(
            project, tick, 77, (f"{key} {folder}", "Permission denied"), repair
        )
    finally:
        shutil.rmtree(world, ignore_errors=True)


# -- 4. litter: the SQLite WAL -------------------------------------------------------------


def test_a_tick_that_wrote_truncates_the_wal(new_project: ProjectFactory) -> None:
    """Another connection stays open (a `run` loop, a reader), so the tick's
    own close is not the last one, which is what used to checkpoint and
    remove the WAL: the tick must truncate it itself."""
    project = new_project(stages=STAGES)
    lines = "".join(json.dumps({"slug": f"t{n}", "title": "x"}) + "\n" for n in range(40))
    assert project.cli("add", "--from", "-", input=lines).exit_code == 0
    db = sqlite_file(project.db_url)
    wal = Path(f"{db}-wal")
    reader = sqlite3.connect(db)
    try:
        assert reader.execute("SELECT count(*) FROM tasks").fetchone() == (40,)
        result = run(project, "tick")
        assert result.returncode == 0, result.stderr[-2000:]
        assert project.query("SELECT count(*) FROM attempts") == [(40,)]
        size = wal.stat().st_size if wal.exists() else 0
        assert size == 0, f"the WAL is {size} bytes after the tick"
        assert reader.execute("SELECT count(*) FROM attempts").fetchone() == (40,)
    finally:
        reader.close()


def test_the_wal_has_a_size_limit(new_project: ProjectFactory) -> None:
    from orchestrator.storage.db import WAL_SIZE_LIMIT, make_engine

    project = new_project()
    engine = make_engine(project.db_url)
    try:
        with engine.connect() as conn:
            limit = conn.exec_driver_sql("PRAGMA journal_size_limit").scalar_one()
    finally:
        engine.dispose()
    assert limit == WAL_SIZE_LIMIT


# -- 5. the whole project on a disk that fills up during a tick (issue 17) ---------------


def test_disk_fills_up_under_a_tick_with_two_jobs(
    small_fs: Mount, template_db: Path, tmp_path: Path
) -> None:
    """Database, state and workspaces share a small filesystem; it fills up
    while a `--jobs 2` tick has both attempts running. The tick says so
    with 74, leaves at most its two slots' tasks running and claims nothing
    more; once space is back, the next ticks settle every task with every
    invariant holding, no attempt `crashed` and no task halted."""
    from e2e.e2e_support import agent, stage, wait_for
    from reliability_support import audit_transitions, violations
    from support import make_project

    folder = small_fs(size="8m")
    db = folder / "proj" / "orchestrator.db"
    db.parent.mkdir()
    shutil.copy(template_db, db)
    release, dump = tmp_path / "release", tmp_path / "dump.jsonl"
    worker = agent("--dump", str(dump), "--wait-file", str(release), "--noise", "2000")
    verifier = agent("--noise", "2000", "--pass", "--score", "0.9")
    project = make_project(
        db.parent,
        f"sqlite:///{db}",
        stage("research", worker=worker, verifier=verifier, gate=True, max_attempts=1),
    )
    slugs = ("t1", "t2", "t3", "t4")
    for slug in slugs:
        assert project.cli("add", slug, "--title", slug).exit_code == 0
    tick = project.popen("tick", "--jobs", "2")
    try:
        wait_for(
            lambda: dump.exists() and len(dump.read_text().splitlines()) >= 2,
            timeout=30,
            what="both workers",
        )
        fill(folder)
    finally:
        release.touch()
        out, err = tick.communicate(timeout=90)
    assert tick.returncode == 74, (tick.returncode, out, err)
    assert "Traceback" not in out + err, err
    assert "No space left on device" in err or "disk is full" in err, err
    running = project.query("SELECT count(*) FROM tasks WHERE status = 'running'")[0][0]
    assert running <= 2, running
    assert violations(project.db_url, allow_running=True) == []

    (folder / "filler").unlink()
    for _ in range(len(slugs)):
        if all(project.state(slug) == "research:awaiting_approval" for slug in slugs):
            break
        after = run(project, "tick", "--jobs", "2")
        assert after.returncode == 0, after.stderr[-2000:]
    assert violations(project.db_url) == []
    audit = audit_transitions(project.db_url)
    assert audit.lost == [] and audit.duplicated == []
    assert [project.state(slug) for slug in slugs] == ["research:awaiting_approval"] * 4, (
        project.query("SELECT task_id, number, outcome, error FROM attempts ORDER BY id"),
        err,
    )
    outcomes = [row[0] for row in project.query("SELECT outcome FROM attempts ORDER BY id")]
    assert "crashed" not in outcomes, outcomes
    assert project.query("SELECT count(*) FROM tasks WHERE status = 'halted'") == [(0,)]


# -- 6. a small disk filled and freed, round after round (issue 22, item 13) -------------

FULL_ROUNDS = int(os.environ.get("ORCHESTRATOR_DISK_FULL_ROUNDS", "4"))


def test_a_full_disk_settles_once_space_returns_round_after_round(
    small_fs: Mount, template_db: Path, tmp_path: Path
) -> None:
    """Database, state and workspaces share a 2 MiB tmpfs, filled while a
    `--jobs 2` tick has both attempts running and freed after it ended,
    several rounds over. The full tick names the database file and says
    "full" (never "unreadable"); once space is back a tick or two settle
    every task: none left running, no attempt charged as `crashed` (each
    stage allows one attempt, so a charged one would halt its task), the
    WAL back to nothing."""
    from e2e.e2e_support import agent, stage, wait_for
    from reliability_support import audit_transitions, violations
    from support import make_project

    folder = small_fs(size="2m")
    db = folder / "proj" / "orchestrator.db"
    db.parent.mkdir()
    shutil.copy(template_db, db)
    wal = Path(f"{db}-wal")
    release, dump = tmp_path / "release", tmp_path / "dump.jsonl"
    worker = agent("--dump", str(dump), "--wait-file", str(release), "--noise", "2000")
    verifier = agent("--noise", "2000", "--pass", "--score", "0.9")
    project = make_project(
        db.parent,
        f"sqlite:///{db}",
        stage("research", worker=worker, verifier=verifier, gate=True, max_attempts=1),
    )
    settled: list[str] = []
    for round_ in range(FULL_ROUNDS):
        slugs = (f"r{round_}a", f"r{round_}b", f"r{round_}c")
        for slug in slugs:
            assert project.cli("add", slug, "--title", slug).exit_code == 0
        release.unlink(missing_ok=True)
        dump.unlink(missing_ok=True)
        tick = project.popen("tick", "--jobs", "2")
        try:
            wait_for(
                lambda: dump.exists() and len(dump.read_text().splitlines()) >= 2,
                timeout=30,
                what=f"both workers of round {round_}",
            )
            free = shutil.disk_usage(folder).free
            assert free > 256 * 1024, (round_, free, usage(folder))
            fill(folder)
        finally:
            release.touch()
            out, err = tick.communicate(timeout=90)
        where = f"round {round_}: rc {tick.returncode}\n{err[-2000:]}"
        assert "Traceback" not in out + err, where
        assert "unreadable" not in err, where
        if tick.returncode != 0:
            assert tick.returncode == 74, where
        for line in err.splitlines():
            if "database" in line and "full" in line:  # its own write failed: the file named
                assert str(db) in line, where

        (folder / "filler").unlink()
        for _ in range(3):
            if all(project.state(slug) == "research:awaiting_approval" for slug in slugs):
                break
            after = run(project, "tick", "--jobs", "2")
            assert after.returncode == 0, f"{where}\nafter: {after.stderr[-2000:]}"
        states = [project.state(slug) for slug in slugs]
        assert states == ["research:awaiting_approval"] * 3, (
            where,
            states,
            project.query("SELECT task_id, number, outcome, error FROM attempts ORDER BY id"),
        )
        assert project.query("SELECT count(*) FROM attempts WHERE finished_at IS NULL") == [(0,)]
        assert not wal.exists() or wal.stat().st_size == 0, (where, usage(folder))
        settled.append(f"round {round_}: full tick rc {tick.returncode}")
    assert violations(project.db_url) == []
    audit = audit_transitions(project.db_url)
    assert audit.lost == [] and audit.duplicated == []
    outcomes = [row[0] for row in project.query("SELECT outcome FROM attempts ORDER BY id")]
    assert "crashed" not in outcomes, (outcomes, settled)
    assert project.query("SELECT count(*) FROM tasks WHERE status = 'halted'") == [(0,)]


# -- 7. two processes on one host whose clocks disagree (issue 22, item 15) ---------------


def clock_shifted(project: Project, shift: str | None, *args: str) -> subprocess.Popen[str]:
    """`orchestrator ARGS` in a fresh process whose clock is `shift` off
    (libfaketime, as `faketime` sets it up), or the true clock for None."""
    prefix = [] if shift is None else ["faketime", "-f", shift]
    return subprocess.Popen(
        [*prefix, sys.executable, "-m", "orchestrator", *args],
        cwd=project.dir,
        env=project.process_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@pytest.mark.parametrize(("holder", "judge"), [("-2h", None), (None, "+2h")])
def test_a_skewed_clock_does_not_close_a_live_attempt_on_sqlite(
    new_project: ProjectFactory, tmp_path: Path, holder: str | None, judge: str | None
) -> None:
    """Two configurations share one SQLite database on one host (their own
    lock files, so their ticks run side by side). One tick holds an attempt
    whose worker waits; the other recovers under a clock two hours off. By
    that clock the holder's lease ran out long ago, but the holder is alive:
    its attempt and its worker must survive, and then pass."""
    if shutil.which("faketime") is None:
        cannot("faketime is not installed (apt-get install faketime)")
    from e2e.e2e_support import agent, stage, wait_for
    from support import make_project

    release, pidfile = tmp_path / "release", tmp_path / "worker.pid"
    worker = agent("--pidfile", str(pidfile), "--wait-file", str(release))
    stages = stage("only", worker=worker, verifier=agent("--pass", "--score", "1.0"))
    project = new_project(stages, lease_seconds=3)
    other = make_project(tmp_path / "other", project.db_url, stages, lease_seconds=3)
    assert project.cli("add", "t1", "--title", "held").exit_code == 0
    held = clock_shifted(project, holder, "tick")
    try:
        wait_for(pidfile.exists, timeout=30, what="the holder's worker")
        recovery = clock_shifted(other, judge, "tick", "--max-seconds", "0")
        out, err = recovery.communicate(timeout=60)
        assert recovery.returncode == 0, (out, err)
        rows = project.query("SELECT number, outcome, error FROM attempts")
        assert rows == [(1, None, None)], rows  # the first attempt, still open
        worker_pid = int(pidfile.read_text().split()[0])
        assert Path(f"/proc/{worker_pid}").exists(), "the live attempt's worker was killed"
    finally:
        release.touch()
        out, err = held.communicate(timeout=60)
    assert held.returncode == 0, (out, err)
    assert project.query("SELECT outcome FROM attempts") == [("passed",)], project.query(
        "SELECT outcome, error FROM attempts"
    )


def busy_project(folder: Path, template_db: Path, elsewhere: Path) -> tuple[Project, Path]:
    """60 ready tasks whose attempts write much to the database (a 3 kB
    body, 1.5 kB of reasons), which alone is on `folder`: the attempts'
    folders (five small files each, a 4 KiB block apiece on tmpfs) are
    `elsewhere`, so what fills the volume is the database and its WAL."""
    from support import make_project

    db = folder / "proj" / "orchestrator.db"
    db.parent.mkdir()
    shutil.copy(template_db, db)
    reasons = json.dumps({"pass": True, "score": 0.9, "reasons": ["r" * 1500]})
    stages = (
        '[[pipelines.default.stages]]\nname = "only"\nworker = ["true"]\n'
        f"verifier = {json.dumps(['sh', '-c', f'echo {chr(39)}{reasons}{chr(39)}'])}\n"
    )
    project = make_project(
        db.parent,
        f"sqlite:///{db}",
        stages,
        state_root=str(elsewhere / "state"),
        workspace_root=str(elsewhere / "tasks"),
    )
    lines = "".join(
        json.dumps({"slug": f"t{n:02d}", "title": "x", "body": "b" * 3000}) + "\n"
        for n in range(60)
    )
    assert project.cli("add", "--from", "-", input=lines).exit_code == 0
    return project, db


def test_a_busy_tick_on_a_small_disk_keeps_its_wal_small(
    small_fs: Mount, template_db: Path, tmp_path: Path
) -> None:
    """Issue 22, item 13: on a 2 MiB volume, a tick of 60 attempts grew the
    WAL to 1.5 MB (SQLite checkpoints on its own only past 1,000 pages, 4 MB)
    and filled the disk by itself; the WAL could then not be checkpointed
    (the database file had to grow into space the WAL held) and every later
    write failed for good. Checkpointed every 128 pages, it stays small:
    the database ends near 520 kB and its WAL near 600 kB, on 1.5 MiB where
    a WAL left to 1,000 pages would need 1.5 MB more.

    What this proves is the checkpoint, when no reader holds the WAL: one
    job (`--jobs 1` runs attempts inline, so no other connection of the tick
    is ever inside a read while it writes) and nothing else open. With two
    jobs a reader the scheduler happens to pause can hold the WAL for a
    while (issue 35, item 14, on a loaded machine): what the tick does then
    is the next test's, with the reader held on purpose."""
    folder = small_fs(size="1536k")
    project, db = busy_project(folder, template_db, tmp_path)
    result = run(project, "tick", "--jobs", "1")
    assert result.returncode == 0, (result.stderr[-2000:], usage(folder))
    assert project.query("SELECT count(*) FROM attempts WHERE outcome = 'passed'") == [(60,)]
    wal = Path(f"{db}-wal")
    assert not wal.exists() or wal.stat().st_size == 0, usage(folder)


def test_a_reader_holding_the_wal_fills_a_small_disk_and_the_tick_loses_nothing(
    small_fs: Mount, template_db: Path, tmp_path: Path
) -> None:
    """A reader keeps one snapshot open for the whole tick (a reporting
    script, or a job the scheduler paused in its read), so no checkpoint can
    fold the WAL back and it grows until the volume is full. The tick must
    say so (74, each `Error:` line naming the database) and lose nothing:
    once the reader is gone and space is back, later ticks settle every
    task, no attempt `crashed`, every transition in place, the WAL empty.
    Deterministic: the reader is held by the test, not left to timing, and
    the spare room is set to less than the tick writes."""
    from reliability_support import audit_transitions, violations

    folder = small_fs(size="1536k")
    project, db = busy_project(folder, template_db, tmp_path)
    spare = 384 * 1024
    ballast = folder / "ballast"
    ballast.write_bytes(b"\0" * max(0, shutil.disk_usage(folder).free - spare))
    reader = sqlite3.connect(db)
    try:
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM tasks").fetchone() == (60,)
        result = run(project, "tick", "--jobs", "1")
    finally:
        reader.close()
    assert result.returncode == 74, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.splitlines()
    assert lines and "Traceback" not in result.stderr, result.stderr[-2000:]
    for line in lines:  # an attempt it could not record, then the tick's end
        assert line.startswith("Error: ") and str(db) in line and "full" in line, line
    assert violations(project.db_url, allow_running=True) == []

    ballast.unlink()
    for _ in range(3):
        after = run(project, "tick", "--jobs", "1")
        assert after.returncode == 0, after.stderr[-2000:]
        if project.query("SELECT count(*) FROM tasks WHERE stage <> 'complete'") == [(0,)]:
            break
    assert project.query("SELECT count(*) FROM attempts WHERE outcome = 'passed'") == [(60,)]
    outcomes = {row[0] for row in project.query("SELECT DISTINCT outcome FROM attempts")}
    assert outcomes <= {"passed", "host_error"}, outcomes
    assert violations(project.db_url) == []
    audit = audit_transitions(project.db_url)
    assert audit.lost == [] and audit.duplicated == []
    wal = Path(f"{db}-wal")
    assert not wal.exists() or wal.stat().st_size == 0, usage(folder)
