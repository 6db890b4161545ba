"""The bubblewrap argv, and the runner's stop and timeout through it (real
bwrap): the sandbox dies with its command, children in new sessions too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator import runner
from orchestrator.features.sandbox.bwrap import Walls, bwrap_program, wrap


def test_binds_go_parents_first_and_the_writable_last(tmp_path: Path) -> None:
    work = tmp_path / "project" / "tasks" / "t1"
    work.mkdir(parents=True)
    argv = wrap(
        ["true"],
        Walls(writable=(work,), readable=(tmp_path / "project",), rw=("~/.agent",), ro=("cache",)),
        cwd=work,
        env={"HOME": str(tmp_path / "home")},
        base_dir=tmp_path / "project",
    )
    pairs = [(argv[i], argv[i + 1]) for i in range(len(argv) - 1) if argv[i].startswith("--")]
    binds = [(flag, path) for flag, path in pairs if "bind" in flag and path != "/"]
    assert binds == [
        ("--ro-bind-try", str(tmp_path / "project")),
        ("--ro-bind-try", str(tmp_path / "project" / "cache")),
        ("--bind-try", str(tmp_path / "home" / ".agent")),
        ("--bind", str(work)),
    ]
    assert argv[:3] == ("bwrap", "--ro-bind", "/")
    assert "--unshare-all" in argv and "--die-with-parent" in argv and "--share-net" in argv
    assert "--new-session" not in argv  # the group stop must reach the command
    assert argv[-2:] == ("--", "true")


def test_no_network_drops_share_net(tmp_path: Path) -> None:
    argv = wrap(
        ["true"], Walls(writable=(), network=False), cwd=tmp_path, env={}, base_dir=tmp_path
    )
    assert "--share-net" not in argv and "--unshare-all" in argv


@pytest.mark.skipif(
    bwrap_program() is None and not os.environ.get("CI"), reason="bubblewrap is not installed"
)
def test_a_timeout_ends_the_sandbox_and_its_new_session_children(tmp_path: Path) -> None:
    marker = f"41{os.getpid()}3"
    script = f"setsid sleep {marker} & exec sleep {marker}1"
    argv = wrap(
        ["sh", "-c", script],
        Walls(writable=(tmp_path,)),
        cwd=tmp_path,
        env=os.environ,
        base_dir=tmp_path,
    )
    result = runner.run_command(argv, cwd=tmp_path, env=dict(os.environ), timeout=1.0, grace=1.0)
    assert result.timed_out
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            assert marker.encode() not in cmdline or not runner.pid_alive(int(entry.name))
