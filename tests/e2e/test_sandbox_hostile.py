"""Hostile workers inside real bubblewrap (`sandbox = "bwrap"`), run by real
`orchestrator tick` processes: each tries to escape, is contained, and the
attempt records what happened; the tick survives and no process is left.

The "home" of these ticks lives under /var/tmp, not /tmp, so what hides it
is the sandbox's tmpfs over the home and not merely the private /tmp.
"""

from __future__ import annotations

import json
import os
import pwd
import shlex
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_support import PASS, attempts, kill_quietly, reap, stage, wait_for
from support import Project, copy_database, make_repo, write_config

from orchestrator.features.sandbox.bwrap import bwrap_program
from orchestrator.runner import pid_alive

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("timing")]

# The tests' Python may live in the account's home (pyenv), and their
# virtual environment under /tmp (a clone there), both of which the sandbox
# hides: the verifier (the fake agent) needs them mapped.
PYTHON = os.path.realpath(sys.base_prefix)
VENV = os.path.realpath(sys.prefix)
VERDICT = 'echo \'{"pass": true, "score": 1.0}\''


@pytest.fixture
def backend() -> str:
    """The sandbox is the same whatever the database: SQLite only."""
    return "sqlite"


@pytest.fixture(autouse=True)
def _needs_bwrap() -> None:
    if bwrap_program() is None and not os.environ.get("CI"):
        pytest.skip("bubblewrap (bwrap) is not installed")


@pytest.fixture
def home() -> Iterator[Path]:
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() else None
    folder = Path(tempfile.mkdtemp(prefix="orch-home-", dir=base))
    try:
        (folder / "secret.txt").write_text("the-real-home-secret\n")
        (folder / ".agent").mkdir()
        (folder / ".agent" / "config").write_text("agent-config-ok\n")
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def sh(script: str) -> list[str]:
    return ["sh", "-c", script]


def sandboxed(
    project: Project, home: Path, name: str, script: str, *, upgrade: bool = False, **keys: object
) -> None:
    """`upgrade`: the edit reaches the tasks in flight (`on_change`), not
    only the tasks added after it."""
    project.env["HOME"] = str(home)
    ro = [PYTHON, VENV, *keys.pop("sandbox_ro", [])]  # type: ignore[misc]
    head = '[pipelines.default]\non_change = "upgrade"\n\n' if upgrade else ""
    project.write_config(
        head
        + stage(name, worker=sh(script), verifier=PASS, sandbox="bwrap", sandbox_ro=ro, **keys),
        env_deny=[],
    )


def marked(marker: str) -> list[int]:
    """Live processes whose command line holds `marker` (whatever their environment)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def tick(project: Project) -> str:
    done = project.run("tick", "--max-tasks", "1", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_worker_cannot_write_outside_its_worktree(
    project: Project, home: Path, tmp_path: Path
) -> None:
    outside = project.dir / "outside.txt"
    outside.write_text("before\n")
    # The last write decides the exit status: /etc is read-only.
    script = (
        f"echo inside > ok.txt; echo pwned > {outside}; echo pwned > {tmp_path}/new.txt; "
        "echo pwned > /etc/orch-pwned"
    )
    sandboxed(project, home, "write", script)
    config_before = project.config.read_text()
    project.run("add", "t1", "--title", "hostile")
    tick(project)
    [attempt] = attempts(project, "t1")
    assert attempt["outcome"] == "worker_error"
    assert "Read-only file system" in attempt["error"]
    assert outside.read_text() == "before\n"
    assert project.config.read_text() == config_before
    assert not Path("/etc/orch-pwned").exists()
    assert not (tmp_path / "new.txt").exists()
    assert (project.dir / "tasks" / "t1" / "ok.txt").read_text() == "inside\n"  # its worktree is
    err = (project.dir / "state" / "t1" / "write-001" / "worker.err").read_text()
    assert "Read-only file system" in err


def test_a_worker_cannot_read_the_real_home_but_reads_what_is_mapped(
    project: Project, home: Path
) -> None:
    script = f'cat ~/.agent/config && cat "$HOME/secret.txt" {home}/secret.txt'
    sandboxed(project, home, "peek", script, sandbox_ro=["~/.agent"])
    project.run("add", "t1", "--title", "hostile")
    tick(project)
    [attempt] = attempts(project, "t1")
    assert attempt["outcome"] == "worker_error"
    assert "No such file" in attempt["error"]
    folder = project.dir / "state" / "t1" / "peek-001"
    assert (folder / "worker.out").read_text() == "agent-config-ok\n"  # sandbox_ro is there
    assert "the-real-home-secret" not in (folder / "worker.err").read_text()


def test_a_worker_cannot_signal_the_tick(project: Project, home: Path, tmp_path: Path) -> None:
    # Told the tick's pid in a folder mapped for it (the project's is hidden).
    told = tmp_path / "told"
    told.mkdir()
    pid_file = told / "tick.pid"
    script = (
        f"while [ ! -s {pid_file} ]; do sleep 0.01; done; "
        f"kill -9 $PPID; kill -9 $(cat {pid_file}); "
        "for p in $(ps -eo pid=); do [ $p -ne $$ ] && kill -9 $p; done; "
        f"kill -9 -1; echo signalled; {VERDICT}"
    )
    sandboxed(project, home, "signal", script, sandbox_ro=[str(told)])
    project.run("add", "t1", "--title", "hostile")
    proc = project.popen("tick", "--max-tasks", "1")
    try:
        pid_file.write_text(str(proc.pid))
        done = reap(proc, timeout=120)
    finally:
        kill_quietly([proc.pid] if proc.poll() is None else [])
    assert done.rc == 0, done.stdout + done.stderr
    assert "signal attempt 1 passed" in done.stdout
    [attempt] = attempts(project, "t1")
    assert attempt["outcome"] == "passed"
    assert "signalled" in (project.dir / "state" / "t1" / "signal-001" / "worker.out").read_text()


def test_a_child_left_behind_dies_with_its_attempt(project: Project, home: Path) -> None:
    marker = f"31{os.getpid()}7"
    # Double fork, a new session, and a cleared environment (no process tag).
    script = (
        f"setsid env -i sh -c 'exec sleep {marker}' > /dev/null 2>&1 < /dev/null & "
        f"( sh -c 'env -i sleep {marker}1 &' & ) ; "
        f"while [ $(ps -eo args= | grep -c 'sleep {marker}') -lt 3 ]; do sleep 0.01; done; "
        f"{VERDICT}"
    )
    sandboxed(project, home, "leave", script)
    project.run("add", "t1", "--title", "hostile")
    assert "leave attempt 1 passed" in tick(project)
    wait_for(lambda: not marked(f"sleep {marker}"), timeout=10, what="the children to be gone")


def test_filling_tmp_hits_the_sandbox_limit_not_the_host(project: Project, home: Path) -> None:
    host_before = shutil.disk_usage("/tmp").free
    script = (
        "dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>dd.err; "
        "grep -o 'No space left on device' dd.err; ls -s /tmp/fill; " + VERDICT
    )
    sandboxed(project, home, "fill", script, sandbox_tmp_mb=8)
    project.run("add", "t1", "--title", "hostile")
    assert "fill attempt 1 passed" in tick(project)
    out = (project.dir / "state" / "t1" / "fill-001" / "worker.out").read_text()
    assert "No space left on device" in out
    size_kib = int(out.split("\n")[1].split()[0])
    assert size_kib <= 8 * 1024
    assert not Path("/tmp/fill").exists()
    assert shutil.disk_usage("/tmp").free > host_before - 32 * 1024 * 1024


def test_a_killed_tick_leaves_no_sandboxed_process(project: Project, home: Path) -> None:
    marker = f"32{os.getpid()}9"
    script = (
        f"setsid env -i sh -c 'exec sleep {marker}' > /dev/null 2>&1 < /dev/null & "
        f"exec sleep {marker}1"
    )
    sandboxed(project, home, "long", script, max_attempts=2)
    project.run("add", "t1", "--title", "hostile")
    proc = project.popen("tick", "--max-tasks", "1")
    try:
        wait_for(lambda: len(marked(f"sleep {marker}")) >= 2, what="the sandboxed worker")
        proc.send_signal(signal.SIGKILL)
        reap(proc, timeout=30)
    finally:
        kill_quietly([proc.pid] if proc.poll() is None else [])
    wait_for(lambda: not marked(f"sleep {marker}"), timeout=10, what="the sandbox to die")
    # The next tick's recovery finds the attempt's lease dead and records it;
    # the task in flight takes the harmless worker (a compatible edit).
    sandboxed(project, home, "long", "true", upgrade=True)
    project.run("tick", "--max-tasks", "1", timeout=120)
    first = attempts(project, "t1")[0]
    assert first["outcome"] is not None and first["outcome"] != "passed"
    assert not marked(f"sleep {marker}")


def test_a_fifo_planted_as_its_live_file_does_not_hang_the_tick(
    project: Project, home: Path
) -> None:
    # The state folder is writable inside the sandbox: the worker swaps its
    # own web-tail spool for a FIFO nobody reads, then prints.
    live = project.dir / "state" / "t1" / "fifo-001" / "worker.live"
    script = f"rm -f {live}; mkfifo {live}; echo printed; {VERDICT}"
    sandboxed(project, home, "fifo", script)
    project.run("add", "t1", "--title", "hostile")
    done = project.run("tick", "--max-tasks", "1", timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fifo attempt 1 passed" in done.stdout
    out = (project.dir / "state" / "t1" / "fifo-001" / "worker.out").read_text()
    assert "printed" in out


def test_dev_shm_is_bounded_like_tmp(project: Project, home: Path) -> None:
    """`--dev /dev` mounts a /dev/shm of half the host's memory: the
    sandbox's own is as small as its /tmp."""
    script = (
        "dd if=/dev/zero of=/dev/shm/fill bs=1M count=64 2>dd.err; "
        "grep -o 'No space left on device' dd.err; ls -s /dev/shm/fill; " + VERDICT
    )
    sandboxed(project, home, "shm", script, sandbox_tmp_mb=8)
    project.run("add", "t1", "--title", "hostile")
    assert "shm attempt 1 passed" in tick(project)
    out = (project.dir / "state" / "t1" / "shm-001" / "worker.out").read_text()
    assert "No space left on device" in out
    assert int(out.split("\n")[1].split()[0]) <= 8 * 1024


# The project of the tests below lives under /var/tmp (not the sandbox's
# private /tmp), its database and env file inside it, as a user's would.


@pytest.fixture
def outside_project(home: Path, template_db: Path) -> Iterator[Project]:
    folder = Path(tempfile.mkdtemp(prefix="orch-proj-", dir=home.parent)).resolve()
    try:
        url = copy_database(template_db, folder / "orchestrator.db")
        project = Project(dir=folder, db_url=url, config=folder / "orchestrator.toml")
        project.env["HOME"] = str(home)
        (folder / "secrets.env").write_text("TOKEN=the-env-file-secret\n")
        (folder / "secrets.env").chmod(0o600)
        make_repo(folder)
        yield project
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def host_mounts() -> set[str]:
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    return {line.split()[4] for line in lines}


def repo_config(project: Project, stages: str, extra: str = "") -> None:
    head = '[pipelines.default]\nrepository = "repo"\n' + extra + "\n"
    write_config(project.config, head + stages, env_deny=[], env_file="secrets.env")


PROTECTED = (
    "secrets.env",
    "orchestrator.toml",
    "orchestrator.db",
    "orchestrator.db-wal",
    "orchestrator.db-shm",
)


def test_a_worker_reaches_no_file_of_the_project_but_its_workspace(
    outside_project: Project, home: Path
) -> None:
    """The mount list inside the sandbox is exactly the allow-list, and a
    worker looking through the whole project folder finds only its own
    workspace, its attempt folder and the repository's git data: not the
    config, the env file, the database, nor another task's workspace."""
    project = outside_project
    root = project.dir
    script = (
        "awk '{print \"mount \" $5}' /proc/self/mountinfo; "
        f"find {root} -type f 2>/dev/null | sed 's/^/file /'; "
        f"cat {root}/secrets.env {root}/orchestrator.toml {root}/orchestrator.db 2>&1; "
        "git log -1 --format='subject %s' 2>&1; "
        f"echo pwned > {root}/planted 2>/dev/null; echo pwned > {root}/repo/planted 2>/dev/null; "
        "true"
    )
    repo_config(
        project,
        stage("peek", worker=sh(script), verifier=PASS, sandbox="bwrap", sandbox_ro=[PYTHON, VENV]),
    )
    for slug in ("t1", "t2"):
        assert project.run("add", slug, "--title", "hostile").returncode == 0
    for _ in range(2):
        tick(project)
    for slug, other in (("t1", "t2"), ("t2", "t1")):
        out = (root / "state" / slug / "peek-001" / "worker.out").read_text()
        lines = out.splitlines()
        allowed = {
            "/", "/tmp", "/run/user", str(home), os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir),
            PYTHON, VENV,
            str(root), str(root / "tasks"), str(root / "state"), str(root / "repo"),
            str(root / "tasks" / slug), str(root / "state" / slug / "peek-001"),
            str(root / "repo" / ".git"), str(root / "repo" / ".git" / "worktrees"),
            str(root / "repo" / ".git" / "worktrees" / slug),
            "/run",  # the host's sockets, hidden under an empty tmpfs
            # The protected files, each shown as /dev/null wherever it is.
            *(str(root / name) for name in PROTECTED),
        }  # fmt: skip
        mounts = {line.removeprefix("mount ") for line in lines if line.startswith("mount ")}
        # The system's own mounts come along read-only with `/`.
        beyond = {
            m for m in mounts - allowed - host_mounts() if not m.startswith(("/dev", "/proc"))
        }
        assert not beyond, f"mounted beyond the allow-list: {sorted(beyond)}"
        files = [Path(line.removeprefix("file ")) for line in lines if line.startswith("file ")]
        assert files, out
        mine = (root / "tasks" / slug, root / "state" / slug / "peek-001", root / "repo" / ".git")
        # The protected files' names are there (their mount points), their
        # contents not: /dev/null, as the reads below show.
        masked = {root / name for name in PROTECTED}
        strays = [
            f for f in files if f not in masked and not any(p == f or p in f.parents for p in mine)
        ]
        assert strays == [], strays
        assert not [f for f in files if root / "repo" / ".git" / "worktrees" / other in f.parents]
        assert "the-env-file-secret" not in out
        assert "[orchestrator]" not in out and "SQLite format" not in out
        assert "subject base" in out  # git works on its own worktree's data
    assert not (root / "planted").exists() and not (root / "repo" / "planted").exists()


def test_the_land_check_runs_inside_the_walls(outside_project: Project) -> None:
    """The worker plants the code `land_check` runs (a `conftest.py` for
    `pytest`, here the script the check names): it runs in the stage's
    walls, so it reads no secret and writes nothing of the project."""
    project = outside_project
    root = project.dir
    evil = (
        f"cat {root}/secrets.env > {root}/stolen 2>/dev/null; cat {root}/secrets.env 2>&1; "
        f"echo moved > {root}/repo/keep.txt 2>/dev/null; "
        f"ls {root}/tasks; echo checked-inside; exit 0"
    )
    worker = f"printf '%s\\n' {shlex.quote(evil)} > check.sh"
    repo_config(
        project,
        stage(
            "implement",
            worker=sh(worker),
            verifier=PASS,
            sandbox="bwrap",
            sandbox_ro=[PYTHON, VENV],
        ),
        extra=f'land = "merge"\nland_check = {json.dumps(["sh", "check.sh"])}\n',
    )
    assert project.run("add", "t1", "--title", "hostile").returncode == 0
    assert project.run("add", "t2", "--title", "bystander").returncode == 0
    done = project.run("tick", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert project.state("t1") == "complete", done.stdout + done.stderr
    out = (root / "state" / "t1" / "land" / "check.out").read_text()
    assert "checked-inside" in out
    assert "the-env-file-secret" not in out and "t2" not in out.split("checked-inside")[0]
    assert not (root / "stolen").exists()
    assert (root / "repo" / "keep.txt").read_text() == "keep\n"
