"""Ways out of the walls an adversarial review found: a root tick's
capabilities, a parent folder mapped back over a protected file, a host
socket in /run, and a program reached through a link in a hidden folder."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from pathlib import Path

import pytest
from e2e_support import attempts
from support import Project
from test_sandbox_hostile import VERDICT, home, sandboxed, tick  # noqa: F401 - fixtures

from orchestrator.features.sandbox.bwrap import bwrap_program

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("timing")]


@pytest.fixture
def backend() -> str:
    return "sqlite"


@pytest.fixture(autouse=True)
def _needs_bwrap() -> None:
    if bwrap_program() is None:
        pytest.skip("bubblewrap (bwrap) is not installed")


@pytest.mark.skipif(os.geteuid() != 0, reason="the tick must run as root")
def test_a_root_ticks_sandbox_cannot_unmount_its_walls_or_write_the_host(
    project: Project,
    home: Path,  # noqa: F811
) -> None:
    # bwrap run by root keeps every capability in its user namespace (uid 0
    # mapped to 0): the worker unmounts the tmpfs that hides the project and
    # remounts / read-write, then writes the host's files as root.
    marker = Path("/var/tmp") / f"orch-pwned-{uuid.uuid4().hex}"
    script = (
        f"umount -l /tmp; cat {project.config} > seen.txt; "
        f"mount -o remount,bind,rw /; echo pwned > {marker}; {VERDICT}"
    )
    sandboxed(project, home, "esc", script)
    project.run("add", "t1", "--title", "hostile")
    try:
        tick(project)
        seen = (project.dir / "tasks" / "t1" / "seen.txt").read_text()
        assert "[orchestrator]" not in seen, "the worker read the config by unmounting /tmp"
        assert not marker.exists(), "the worker wrote the host's /var/tmp"
    finally:
        marker.unlink(missing_ok=True)


def test_the_env_file_stays_hidden_when_a_parent_folder_of_it_is_mapped(
    project: Project,
    home: Path,  # noqa: F811
) -> None:
    # env_file in the home (hidden by the home's tmpfs, so never masked);
    # sandbox_ro = ["~/.config"] for an agent's settings binds it back.
    folder = home / ".config" / "orch"
    folder.mkdir(parents=True)
    env_file = folder / "env"
    env_file.write_text("API_KEY=sk-live-secret\n")
    env_file.chmod(0o600)
    script = f"cat {env_file} > seen.txt; {VERDICT}"
    project.env["HOME"] = str(home)
    sandboxed(project, home, "peek", script, sandbox_ro=["~/.config"])
    text = project.config.read_text().replace(
        "[orchestrator]\n", f'[orchestrator]\nenv_file = "{env_file}"\n', 1
    )
    project.config.write_text(text)
    project.run("add", "t1", "--title", "hostile")
    tick(project)
    seen = project.dir / "tasks" / "t1" / "seen.txt"
    assert "sk-live-secret" not in seen.read_text()


def test_a_host_unix_socket_is_not_reachable_without_network(
    project: Project,
    home: Path,  # noqa: F811
) -> None:
    # `--ro-bind / /` leaves every path socket connectable (connect() ignores
    # a read-only mount): PostgreSQL's in /run/postgresql, MySQL's, dbus...
    # /run is hidden whole; a socket elsewhere is the docs' stated limit.
    where = Path("/run") / f"orch-sock-{uuid.uuid4().hex[:8]}"
    where.mkdir()
    path = where / "db.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    reached: list[bool] = []

    def accept() -> None:
        server.settimeout(60)
        try:
            conn, _ = server.accept()
            reached.append(True)
            conn.close()
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    script = (
        f"python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"{path}\")'"
        f" ; {VERDICT}"
    )
    sandboxed(project, home, "sock", script, sandbox_network=False)
    project.run("add", "t1", "--title", "hostile")
    try:
        tick(project)
    finally:
        server.close()
        path.unlink(missing_ok=True)
        where.rmdir()
    assert not reached, "the sandboxed worker connected to a socket of the host"


def test_a_program_reached_through_a_link_in_a_hidden_folder_holds_the_tick(
    project: Project,
    home: Path,  # noqa: F811
) -> None:
    # item 11: the interpreter is a link in a hidden folder (a project's venv)
    # to a visible file: `unseen_program` follows the link on the host and
    # says "seen"; inside, the kernel finds no link: every attempt is charged.
    venv = project.dir / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python3").symlink_to(os.path.realpath("/usr/bin/python3"))
    tools = Path("/var/tmp") / f"orch-tools-{uuid.uuid4().hex[:8]}"
    tools.mkdir()
    judge = tools / "judge.py"
    judge.write_text(f'#!{venv / "python3"}\nprint(\'{{"pass": true, "score": 1.0}}\')\n')
    judge.chmod(0o755)
    try:
        sandboxed(project, home, "run", str(judge), sandbox_ro=[str(tools)])
        text = project.config.read_text().replace(
            'worker = ["sh", "-c", "' + str(judge) + '"]', f'worker = ["{judge}"]'
        )
        project.config.write_text(text)
        project.run("add", "t1", "--title", "x")
        done = project.run("tick", "--max-tasks", "1", timeout=120)
        assert done.returncode == 78, done.stdout + done.stderr  # held, not charged
        # Not started, so charged nothing: a host_error, as the tick's own check records it.
        assert [a["outcome"] for a in attempts(project, "t1")] in ([], ["host_error"])
    finally:
        judge.unlink()
        tools.rmdir()
