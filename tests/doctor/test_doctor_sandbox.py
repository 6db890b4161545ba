"""`doctor` tries bubblewrap for real when a stage asks for it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import Project, copy_database, make_project

from orchestrator.features.sandbox.bwrap import bwrap_program

STAGE = """
[[pipelines.default.stages]]
name = "implement"
worker = ["true"]
verifier = ["sh", "-c", "echo '{{\\"pass\\": true}}'"]
sandbox = "{mode}"
"""


@pytest.fixture
def sqlite_project(tmp_path: Path, template_db: Path) -> Project:
    url = copy_database(template_db, tmp_path / "proj" / "orchestrator.db")
    return make_project(tmp_path / "proj", url, STAGE.format(mode="bwrap"))


def sandbox_lines(project: Project) -> tuple[int, list[str]]:
    result = project.cli("doctor")
    return result.exit_code, [line for line in result.stdout.splitlines() if " sandbox " in line]


def test_bubblewrap_runs_here(sqlite_project: Project) -> None:
    if bwrap_program() is None and not os.environ.get("CI"):
        pytest.skip("bubblewrap (bwrap) is not installed")
    code, out = sandbox_lines(sqlite_project)
    assert code == 0
    assert out == [out[0]] and out[0].startswith("ok ") and "default.implement" in out[0]


def test_no_check_without_a_sandboxed_stage(sqlite_project: Project) -> None:
    sqlite_project.write_config(STAGE.format(mode="none"))
    assert sandbox_lines(sqlite_project) == (0, [])


def test_missing_bubblewrap_says_how_to_install_it(sqlite_project: Project, tmp_path: Path) -> None:
    sqlite_project.env["PATH"] = str(tmp_path / "empty")
    code, out = sandbox_lines(sqlite_project)
    assert code == 1
    assert out[0].startswith("fail") and "apt-get install bubblewrap" in out[0]


def test_bubblewrap_that_cannot_make_namespaces_says_what_to_do(
    sqlite_project: Project, tmp_path: Path
) -> None:
    """A host forbidding user namespaces cannot be made here (we are root):
    a stand-in `bwrap` prints what the real one prints there, and fails."""
    folder = tmp_path / "bin"
    folder.mkdir()
    fake = folder / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the"
        " kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    sqlite_project.env["PATH"] = f"{folder}{os.pathsep}{os.environ['PATH']}"
    code, out = sandbox_lines(sqlite_project)
    assert code == 1
    assert "No permissions to creating new namespace" in out[0]
    assert "unprivileged_userns_clone" in out[0] and 'sandbox = "none"' in out[0]


@pytest.fixture
def tmp_venv() -> Iterator[Path]:
    """A virtualenv's `bin` under /tmp, where such folders are often made,
    and which the sandbox covers with its own private /tmp."""
    folder = Path(tempfile.mkdtemp(prefix="venv-", dir="/tmp"))
    try:
        (folder / "bin").mkdir()
        agent = folder / "bin" / "agent"
        agent.write_text("#!/bin/sh\nexit 0\n")
        agent.chmod(0o755)
        yield folder
    finally:
        shutil.rmtree(folder)


def _needs_bwrap() -> None:
    if bwrap_program() is None and not os.environ.get("CI"):
        pytest.skip("bubblewrap (bwrap) is not installed")


def test_a_program_the_sandbox_cannot_see_fails_doctor(
    sqlite_project: Project, tmp_venv: Path
) -> None:
    """A worker in a folder the sandbox does not mount would spend every
    attempt on `bwrap: execvp ...: No such file or directory`: doctor says
    so, and which key binds it back; with that key it passes."""
    _needs_bwrap()
    agent = json.dumps(str(tmp_venv / "bin" / "agent"))
    stage = STAGE.format(mode="bwrap").replace('worker = ["true"]', f"worker = [{agent}]")
    sqlite_project.write_config(stage)
    code, out = sandbox_lines(sqlite_project)
    assert code == 1, out
    failed = [line for line in out if line.startswith("fail")]
    assert len(failed) == 1, out
    assert "default.implement" in failed[0] and str(tmp_venv / "bin" / "agent") in failed[0]
    assert "not visible inside the sandbox" in failed[0] and "sandbox_ro" in failed[0]
    ro = f"sandbox_ro = [{json.dumps(str(tmp_venv))}]\n"
    sqlite_project.write_config(stage + ro)
    code, out = sandbox_lines(sqlite_project)
    assert code == 0 and not [line for line in out if not line.startswith("ok")], out


def test_visible_agrees_with_bubblewrap(tmp_path: Path, tmp_venv: Path) -> None:
    """`sandbox.visible` answers what bubblewrap itself shows inside the
    same walls, path by path."""
    _needs_bwrap()
    from orchestrator.features.sandbox import bwrap as sandbox

    project = tmp_path / "proj"
    (project / "state").mkdir(parents=True)
    (tmp_venv / "lib").mkdir()
    walls = sandbox.Walls(
        writable=(project / "state",),
        readable=(project,),
        ro=(str(tmp_venv / "lib"),),
        network=False,
        tmp_mb=1,
    )
    env = {"HOME": str(Path.home()), "PATH": "/usr/bin:/bin"}
    paths = [
        Path("/bin/sh"),
        Path("/usr/bin/env"),
        project / "orchestrator.toml",
        project,
        project / "state",
        tmp_venv / "bin" / "agent",
        tmp_venv / "lib",
        tmp_venv,
        Path.home(),
    ]
    (project / "orchestrator.toml").write_text("")
    for path in paths:
        argv = sandbox.wrap(
            ["test", "-e", str(path)], walls, cwd=project, env=env, base_dir=project
        )
        seen = subprocess.run(argv, capture_output=True, check=False).returncode == 0
        assert sandbox.visible(path, walls, env=env, base_dir=project) == seen, path


def test_the_tick_holds_a_task_whose_program_the_sandbox_cannot_see(
    sqlite_project: Project, tmp_venv: Path
) -> None:
    """The tick does not spend attempts on it: the attempt is not started
    and counts toward nothing (`host_error`), the tick stops claiming and
    exits 78 with the reason, the task waits, ready, for the config."""
    _needs_bwrap()
    agent = json.dumps(str(tmp_venv / "bin" / "agent"))
    stage = STAGE.format(mode="bwrap").replace('worker = ["true"]', f"worker = [{agent}]")
    sqlite_project.write_config(stage)
    assert sqlite_project.run("add", "t1", "--title", "t").returncode == 0
    assert sqlite_project.run("add", "t2", "--title", "t").returncode == 0
    done = sqlite_project.run("tick")
    assert done.returncode == 78, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "not visible inside the sandbox" in said and str(tmp_venv / "bin" / "agent") in said
    assert "execvp" not in said.replace("`execvp", "")
    rows = sqlite_project.query("SELECT outcome FROM attempts")
    assert rows == [("host_error",)]  # one, uncharged; the tick stopped claiming
    assert sqlite_project.state("t1") == "implement" and sqlite_project.state("t2") == "implement"


def test_a_bare_name_is_looked_for_as_execvp_looks_inside(tmp_path: Path, tmp_venv: Path) -> None:
    """The first PATH folder that holds the program inside the walls is the
    one that runs: a copy in a hidden folder earlier on PATH is no fault."""
    from orchestrator.features.sandbox import bwrap as sandbox

    true = tmp_venv / "bin" / "true"
    true.write_text("#!/bin/sh\nexit 0\n")
    true.chmod(0o755)
    project = tmp_path / "proj"
    project.mkdir()
    walls = sandbox.Walls(writable=(project,), network=False, tmp_mb=1)
    env = {"HOME": str(Path.home()), "PATH": f"{tmp_venv / 'bin'}:/usr/bin:/bin"}

    def unseen(program: str) -> Path | None:
        return sandbox.unseen_program(program, walls, env=env, base_dir=project)

    assert unseen("true") is None  # /usr/bin/true or /bin/true runs
    assert unseen("agent") == tmp_venv / "bin" / "agent"  # only in the hidden folder
    assert unseen(str(true)) == true
    assert unseen("./agent") is None and unseen("{workspace}/agent") is None
    assert unseen("no-such-program-here") is None  # not on the host: the attempt says so
    script = project / "uses-hidden-python"
    script.write_text(f"#!{tmp_venv / 'bin' / 'agent'}\n")
    script.chmod(0o755)
    assert unseen(str(script)) == tmp_venv / "bin" / "agent"  # its interpreter


def test_a_land_check_the_sandbox_cannot_see_fails_doctor(sqlite_project: Project) -> None:
    """The land check runs inside the walls too: one naming the project's own
    virtualenv (a link in the hidden project folder) would send the task
    back at every landing with `bwrap: execvp ...`; doctor names it."""
    _needs_bwrap()
    from support import make_repo

    make_repo(sqlite_project.dir)
    venv = sqlite_project.dir / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python3").symlink_to(os.path.realpath("/usr/bin/python3"))
    check = json.dumps([str(venv / "python3"), "-c", "print(1)"])
    head = f'[pipelines.default]\nrepository = "repo"\nland = "merge"\nland_check = {check}\n'
    sqlite_project.write_config(head + STAGE.format(mode="bwrap"))
    code, out = sandbox_lines(sqlite_project)
    assert code == 1, out
    failed = [line for line in out if line.startswith("fail")]
    assert len(failed) == 1 and "default.land_check" in failed[0], out
    assert "not visible inside the sandbox" in failed[0]
