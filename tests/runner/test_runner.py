"""The runner against real processes: substitution, environment, capture, kills.

Every test starts real children (`sys.executable -c ...`, `/bin/sh`) in a temp
directory; waits poll files or pids, never fixed sleeps longer than needed.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from orchestrator.runner import (
    MAX_VALUE_BYTES,
    PLACEHOLDERS,
    ProcessIdentity,
    ProcessResult,
    adopt_orphans,
    boot_id,
    child_environment,
    host_name,
    kill_process_group,
    pid_alive,
    process_start_time,
    render_argv,
    run_command,
)

PY = sys.executable
MARKER = re.compile(r"\n…\[(\d+) bytes omitted\]…\n")


# Safety nets, never bounds on speed: a command that must not time out gets
# PATIENCE, and so does a wait for something that must happen. A child that
# must be cut short sleeps LONG and then writes a marker: a run that ends
# with the marker unwritten ended it, which no load can fake.
PATIENCE = 120.0
LONG = 600


def py(code: str) -> list[str]:
    return [PY, "-c", code]


def sleeper(woke: Path) -> list[str]:
    """A child that sleeps LONG, then leaves `woke` behind."""
    return py(f"import pathlib, time; time.sleep({LONG}); pathlib.Path({str(woke)!r}).touch()")


def run(argv: list[str], cwd: Path, **kwargs: Any) -> ProcessResult:
    kwargs.setdefault("timeout", PATIENCE)
    kwargs.setdefault("env", dict(os.environ))
    return run_command(argv, cwd=cwd, **kwargs)


def wait_for(predicate: Callable[[], bool], timeout: float = PATIENCE) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def read_pid(path: Path, timeout: float = PATIENCE) -> int:
    assert wait_for(lambda: path.exists() and path.read_text().strip() != "", timeout)
    return int(path.read_text().strip())


@pytest.fixture
def stray_pids() -> Iterator[list[int]]:
    """Pids a test may leave behind on failure (or on purpose, for escapees); killed afterwards."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


# --------------------------------------------------------------------------- render_argv


VALUES = {
    "task": "fix-login",
    "stage": "review",
    "attempt": "3",
    "workspace": "/ws/fix-login",
    "prompt_file": "/state/fix-login/prompt.md",
    "hint": "add a test",
    "config_dir": "/project",
    "context_file": "/state/fix-login/context.json",
    "prev_session": "sess-1",
    "candidate": "2",
    "feedback": "alice: use UTC",
}


def test_render_substitutes_every_placeholder() -> None:
    template = ["agent", "--task={task}", "{stage}/{attempt}", "{workspace}", "{prompt_file}"]
    template += ["hint: {hint}!", "{context_file}", "--resume={prev_session}", "c{candidate}"]
    template += ["{feedback}"]
    assert render_argv(template, VALUES) == [
        "agent",
        "--task=fix-login",
        "review/3",
        "/ws/fix-login",
        "/state/fix-login/prompt.md",
        "hint: add a test!",
        "/state/fix-login/context.json",
        "--resume=sess-1",
        "c2",
        "alice: use UTC",
    ]
    assert set(PLACEHOLDERS) == set(VALUES)


def test_render_leaves_other_braces_alone() -> None:
    template = [
        '{"pass": true}',
        "{unknown}",
        "{ task }",
        "{TASK}",
        "{}",
        "{0}",
        "{task",
        "{{task}}",
    ]
    assert render_argv(template, VALUES) == [
        '{"pass": true}',
        "{unknown}",
        "{ task }",
        "{TASK}",
        "{}",
        "{0}",
        "{task",
        "{fix-login}",
    ]


def test_render_does_not_reexpand_values() -> None:
    values = dict(VALUES, task="{stage}", hint="{hint}{task}")
    assert render_argv(["{task}-{hint}"], values) == ["{stage}-{hint}{task}"]


def test_render_cleans_and_caps_values() -> None:
    values = dict(VALUES, task="a\x00b\ud800c", hint="é" * 10_000)
    task_arg, hint_arg = render_argv(["{task}", "{hint}"], values)
    assert task_arg == "ab\ufffdc"
    assert len(hint_arg.encode("utf-8")) <= MAX_VALUE_BYTES
    assert hint_arg == "é" * (MAX_VALUE_BYTES // 2)


def test_render_missing_value_is_empty_and_template_nul_removed() -> None:
    assert render_argv(["x{hint}y", "a\x00b"], {"task": "t"}) == ["xy", "ab"]


# --------------------------------------------------------------------------- child_environment


def test_child_environment_filters_and_layers() -> None:
    base = {
        "PATH": "/bin",
        "HOME": "/home/u",
        "ORCHESTRATOR_DB_URL": "postgresql://u:secret@db/x",
        "ORCHESTRATOR_CONFIG": "/etc/orch.toml",
        "ORCHESTRATOR_TASK": "stale-outer-task",
        "AWS_SECRET_ACCESS_KEY": "aws",
        "GH_TOKEN": "gh",
        "FOO": "base",
    }
    env = child_environment(
        base,
        deny=["AWS_SECRET_ACCESS_KEY", "*_TOKEN"],
        extra={"FOO": "stage", "MODEL": "opus", "ORCHESTRATOR_DB_URL": "sneaky"},
        orchestrator_vars={"ORCHESTRATOR_TASK": "fix-login", "ORCHESTRATOR_STAGE": "review"},
    )
    assert env == {
        "PATH": "/bin",
        "HOME": "/home/u",
        "FOO": "stage",
        "MODEL": "opus",
        "ORCHESTRATOR_TASK": "fix-login",
        "ORCHESTRATOR_STAGE": "review",
    }


def test_child_environment_cleans_values_and_drops_bad_names() -> None:
    env = child_environment(
        {"A": "x\x00y", "B\x00C": "dropped", "D=E": "dropped", "": "dropped", "S": "\udcff"},
        deny=[],
        extra={"BIG": "z" * (MAX_VALUE_BYTES + 100)},
        orchestrator_vars={"ORCHESTRATOR_NEXT_HINT": "h\x00i"},
    )
    assert env == {
        "A": "xy",
        "S": "\ufffd",
        "BIG": "z" * MAX_VALUE_BYTES,
        "ORCHESTRATOR_NEXT_HINT": "hi",
    }


def test_child_sees_exactly_the_built_environment(tmp_path: Path) -> None:
    base = dict(os.environ, ORCHESTRATOR_DB_URL="sqlite:///x.db", SECRET_KEY="k")
    env = child_environment(
        base,
        deny=["SECRET_KEY"],
        extra={"STAGE_VAR": "1"},
        orchestrator_vars={"ORCHESTRATOR_TASK": "t", "ORCHESTRATOR_ATTEMPT": "2"},
    )
    result = run(py("import json, os; print(json.dumps(dict(os.environ)))"), tmp_path, env=env)
    seen = json.loads(result.stdout)
    assert "ORCHESTRATOR_DB_URL" not in seen
    assert "SECRET_KEY" not in seen
    assert seen["STAGE_VAR"] == "1"
    assert seen["ORCHESTRATOR_TASK"] == "t"
    assert seen["ORCHESTRATOR_ATTEMPT"] == "2"


# --------------------------------------------------------------------------- exit, start errors


@pytest.mark.parametrize("code", [0, 1, 3, 255])
def test_exit_codes(tmp_path: Path, code: int) -> None:
    result = run(py(f"import sys; print('hi'); sys.exit({code})"), tmp_path)
    assert result.exit_code == code
    assert result.signal is None
    assert result.start_error is None
    assert result.ok is (code == 0)
    assert result.stdout == "hi\n"
    assert result.stdout_bytes == 3


def test_stderr_and_cwd(tmp_path: Path) -> None:
    code = "import os, sys; sys.stderr.write('E:' + os.getcwd()); print('O')"
    result = run(py(code), tmp_path)
    assert result.stderr == f"E:{tmp_path}"
    assert result.stderr_bytes == len(result.stderr.encode())
    assert result.stdout == "O\n"


def _script(tmp_path: Path, name: str, body: bytes, mode: int) -> Path:
    path = tmp_path / name
    path.write_bytes(body)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing", "command not found: 'definitely-not-a-command-xyz'"),
        ("missing_cwd", "working directory not found"),
        ("not_executable", "permission denied"),
        ("bad_shebang", "interpreter not found"),
        ("no_shebang", "exec format error"),
        ("nul", "cannot start"),
        ("empty", "empty command"),
    ],
)
def test_start_errors_are_results(tmp_path: Path, case: str, expected: str) -> None:
    cwd = tmp_path
    argv: list[str]
    if case == "missing":
        argv = ["definitely-not-a-command-xyz", "--flag"]
    elif case == "missing_cwd":
        argv, cwd = ["/bin/sh", "-c", "true"], tmp_path / "nope"
    elif case == "not_executable":
        path = _script(tmp_path, "plain.sh", b"#!/bin/sh\necho hi\n", stat.S_IRUSR | stat.S_IWUSR)
        argv = [str(path)]
    elif case == "bad_shebang":
        argv = [str(_script(tmp_path, "bad.sh", b"#!/nonexistent/interp\n", 0o755))]
    elif case == "no_shebang":
        argv = [str(_script(tmp_path, "junk", b"\x7fjunk\x00\x01\x02" * 8, 0o755))]
    elif case == "nul":
        argv = ["/bin/sh", "-c", "echo a\x00b"]
    else:
        argv = []
    result = run(argv, cwd)
    assert result.start_error is not None
    assert expected in result.start_error
    assert "\n" not in result.start_error
    assert result.exit_code is None
    assert result.identity is None
    assert not result.ok


# --------------------------------------------------------------------------- stdin


def test_stdin_is_devnull_by_default(tmp_path: Path) -> None:
    result = run(py("import sys; print(repr(sys.stdin.read()))"), tmp_path, timeout=PATIENCE)
    assert result.stdout == "''\n"


def test_stdin_fed_and_echoed_without_deadlock(tmp_path: Path) -> None:
    data = os.urandom(1_000_000).hex().encode()  # 2 MB: both pipes fill up at once
    code = "import shutil, sys; shutil.copyfileobj(sys.stdin.buffer, sys.stdout.buffer)"
    result = run(py(code), tmp_path, stdin_data=data, timeout=PATIENCE)
    assert result.ok
    assert result.stdout_bytes == len(data)
    assert result.stdout.startswith(data[:1000].decode())
    assert result.stdout.endswith(data[-1000:].decode())


def test_small_stdin(tmp_path: Path) -> None:
    result = run(py("import sys; print(sys.stdin.read().upper())"), tmp_path, stdin_data=b"hey")
    assert result.stdout == "HEY\n"
    empty = run(py("import sys; print(len(sys.stdin.read()))"), tmp_path, stdin_data=b"")
    assert empty.stdout == "0\n"


@pytest.mark.parametrize(
    "code", ["import sys; sys.exit(0)", "import os, time; os.close(0); time.sleep(0.3)"]
)
def test_child_ignoring_stdin_is_fine(tmp_path: Path, code: str) -> None:
    result = run(py(code), tmp_path, stdin_data=b"x" * 1_048_576, timeout=PATIENCE)
    assert result.ok, result


# --------------------------------------------------------------------------- timeouts and groups


def test_timeout_kills_group_including_grandchild_holding_pipe(
    tmp_path: Path, stray_pids: list[int]
) -> None:
    pidfile, woke = tmp_path / "grandchild.pid", tmp_path / "woke"
    script = (
        f"(sleep {LONG}; touch {woke}.grandchild) & echo $! > {pidfile}; "
        f"echo started; sleep {LONG}; touch {woke}"
    )
    result = run(["/bin/sh", "-c", script], tmp_path, timeout=1.0, grace=1.0)
    grandchild = read_pid(pidfile)
    stray_pids.append(grandchild)
    assert result.timed_out
    assert not result.ok
    assert result.signal == signal.SIGTERM
    assert result.stdout == "started\n"
    assert wait_for(lambda: not pid_alive(grandchild))
    # Neither slept its LONG out: the run ended them, not the pipe's end.
    assert list(tmp_path.glob("woke*")) == []


def test_timeout_escalates_to_sigkill_when_sigterm_ignored(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    code = (
        "import signal, time, pathlib; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        f"pathlib.Path({str(ready)!r}).write_text('1'); time.sleep({LONG}); "
        f"pathlib.Path({str(ready)!r}).write_text('woke')"
    )
    began = time.monotonic()
    result = run(py(code), tmp_path, timeout=1.0, grace=0.5)
    elapsed = time.monotonic() - began
    assert ready.read_text() == "1"  # killed in its sleep
    assert result.timed_out
    assert result.signal == signal.SIGKILL
    assert result.exit_code is None
    assert elapsed >= 1.4  # the grace was given first (a floor: load only adds to it)


def test_grandchild_ignoring_sigterm_is_killed_after_bounded_drain(
    tmp_path: Path, stray_pids: list[int]
) -> None:
    pidfile, woke = tmp_path / "stubborn.pid", tmp_path / "woke"
    script = f"(trap '' TERM; sleep {LONG}; touch {woke}) & echo $! > {pidfile}; sleep {LONG}"
    result = run(["/bin/sh", "-c", script], tmp_path, timeout=0.5, grace=0.5)
    stubborn = read_pid(pidfile)
    stray_pids.append(stubborn)
    assert result.timed_out
    assert wait_for(lambda: not pid_alive(stubborn))
    assert not woke.exists()  # SIGKILLed in its sleep: the drain did not wait it out


def test_timeout_applies_after_child_closes_its_pipes(tmp_path: Path) -> None:
    woke = tmp_path / "woke"
    script = f"exec >&- 2>&-; sleep {LONG}; touch {woke}"
    result = run(["/bin/sh", "-c", script], tmp_path, timeout=0.5, grace=0.5)
    assert result.timed_out
    assert not woke.exists()


def test_setsid_escaped_grandchild_does_not_hang_and_is_ended(
    tmp_path: Path, stray_pids: list[int]
) -> None:
    """A grandchild in a session of its own holds no pipe of ours (the run
    ends when its parent does, not at the timeout) and, the runner being
    the reaper of what its commands leave, does not outlive the run."""
    assert adopt_orphans()
    pidfile = tmp_path / "escaped.pid"
    code = (
        "import pathlib, subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep({LONG})'],"
        " start_new_session=True)\n"
        f"pathlib.Path({str(pidfile)!r}).write_text(str(p.pid))\n"
        "print('parent done', flush=True)\n"
    )
    result = run(py(code), tmp_path, timeout=PATIENCE)
    escaped = read_pid(pidfile)
    stray_pids.append(escaped)
    assert result.ok
    assert not result.timed_out
    assert result.stdout == "parent done\n"
    assert not pid_alive(escaped)


def test_group_swept_after_normal_exit(tmp_path: Path, stray_pids: list[int]) -> None:
    pidfile = tmp_path / "bg.pid"
    script = f"sleep {LONG} >/dev/null 2>&1 & echo $! > {pidfile}"
    result = run(["/bin/sh", "-c", script], tmp_path, timeout=PATIENCE)
    background = read_pid(pidfile)
    stray_pids.append(background)
    assert result.ok
    assert wait_for(lambda: not pid_alive(background))


def test_should_stop_interrupts(tmp_path: Path) -> None:
    calls: list[float] = []
    woke = tmp_path / "woke"

    def should_stop() -> bool:
        calls.append(time.monotonic())
        return len(calls) > 5

    result = run(sleeper(woke), tmp_path, should_stop=should_stop, grace=1.0)
    assert result.interrupted
    assert not result.timed_out
    assert not result.ok
    assert not woke.exists()  # stopped in its sleep
    assert len(calls) == 6  # asked until it said stop, then never again
    gaps = [later - earlier for earlier, later in itertools.pairwise(calls)]
    assert gaps and min(gaps) >= 0.09  # at most once per poll_interval


def test_should_stop_raising_kills_child(tmp_path: Path) -> None:
    pids: list[int] = []

    def should_stop() -> bool:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        run(
            py("import time; time.sleep(30)"),
            tmp_path,
            on_start=lambda identity: pids.append(identity.pid),
            should_stop=should_stop,
        )
    assert not pid_alive(pids[0])


def test_killed_by_signal(tmp_path: Path) -> None:
    result = run(py("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"), tmp_path)
    assert result.signal == signal.SIGKILL
    assert result.exit_code is None
    assert not result.timed_out
    assert not result.ok


# --------------------------------------------------------------------------- output capture


def test_huge_output_keeps_verdict_in_tail(tmp_path: Path) -> None:
    verdict = '{"score": 0.9, "pass": true}'
    code = (
        "import sys\n"
        "w = sys.stdout.buffer\n"
        "line = b'x' * 1023 + b'\\n'\n"
        "for _ in range(50 * 1024): w.write(line)\n"
        f"w.write(b'{verdict}\\n')\n"
    )
    out_file = tmp_path / "logs" / "deep" / "stdout.txt"
    err_file = tmp_path / "logs" / "deep" / "stderr.txt"
    out_file.parent.mkdir(parents=True)
    cap = 1_048_576
    result = run(
        py(code), tmp_path, timeout=30, stdout_path=out_file, stderr_path=err_file, output_cap=cap
    )
    assert result.ok
    assert result.stdout_bytes == 50 * 1024 * 1024 + len(verdict) + 1
    assert result.stdout.endswith(verdict + "\n")
    marker = MARKER.search(result.stdout)
    assert marker is not None
    assert len(result.stdout) <= cap + len(marker.group(0))
    head, tail = result.stdout[: marker.start()], result.stdout[marker.end() :]
    assert int(marker.group(1)) == result.stdout_bytes - len(head) - len(tail)
    assert len(head) == cap // 4
    assert out_file.read_text(encoding="utf-8") == result.stdout
    assert not err_file.exists()  # an empty stream leaves no file


def test_small_cap_still_keeps_64k_tail(tmp_path: Path) -> None:
    code = "import sys\nfor i in range(20000): print(f'line {i:06d}')\n"
    result = run(py(code), tmp_path, output_cap=4096)
    marker = MARKER.search(result.stdout)
    assert marker is not None
    assert result.stdout.startswith("line 000000\n")
    assert result.stdout.endswith("line 019999\n")
    assert len(result.stdout[marker.end() :]) >= 64 * 1024 - 3


def test_the_last_line_is_kept_whole_past_the_cap_up_to_its_bound(tmp_path: Path) -> None:
    # An agent's result envelope is one long line; cut, it is no envelope.
    code = (
        "import sys\n"
        "w = sys.stdout.buffer\n"
        "w.write(b'noise\\n' * 200_000)\n"  # 1.2 MB before it
        "w.write(b'{' + b'y' * (9 * 1024 * 1024) + b'}\\n\\n')\n"
    )
    result = run(py(code), tmp_path, output_cap=65536, timeout=60)
    assert result.ok
    # A 9 MiB last line is past the 8 MiB bound: cut like any other output.
    tail = result.stdout[MARKER.search(result.stdout).end() :]  # type: ignore[union-attr]
    assert tail.endswith("y}\n\n") and not tail.startswith("{")
    assert len(tail) == 8 * 1024 * 1024

    two = "import sys\nsys.stdout.write('a\\n' * 100_000 + '{' + 'b' * 3_000_000 + '}\\n')\n"
    result = run(py(two), tmp_path, output_cap=65536)
    tail = result.stdout[MARKER.search(result.stdout).end() :]  # type: ignore[union-attr]
    assert tail == "{" + "b" * 3_000_000 + "}\n"  # whole, though 45 times the cap


def test_output_below_cap_is_verbatim(tmp_path: Path) -> None:
    result = run(py("print('a' * 5000)"), tmp_path, output_cap=8192)
    assert result.stdout == "a" * 5000 + "\n"
    assert MARKER.search(result.stdout) is None


def test_binary_output_decoded_with_replacement(tmp_path: Path) -> None:
    code = (
        "import os; os.write(1, b'ok \\xff\\xfe\\x00 end \\xed\\xa0\\x80\\n'); "
        "os.write(2, b'\\x80')"
    )
    result = run(py(code), tmp_path)
    assert result.stdout == "ok \ufffd\ufffd end \ufffd\ufffd\ufffd\n"
    assert result.stderr == "\ufffd"
    assert result.stdout_bytes == 15
    result.stdout.encode("utf-8")  # storable


# --------------------------------------------------------------------------- identity and recovery


def test_identity_recorded_on_start(tmp_path: Path) -> None:
    seen: list[tuple[ProcessIdentity, int, str | None]] = []

    def on_start(identity: ProcessIdentity) -> None:
        seen.append((identity, os.getpgid(identity.pid), process_start_time(identity.pid)))

    result = run(py("print('x')"), tmp_path, on_start=on_start)
    ((identity, pgid, start_time),) = seen
    assert result.identity == identity
    assert identity.pid > 0
    assert identity.pgid == identity.pid == pgid
    assert identity.host == socket.gethostname() == host_name()
    assert identity.boot_id == boot_id()
    if sys.platform.startswith("linux") or sys.platform == "darwin":
        assert identity.start_time is not None
        assert identity.start_time == start_time
        assert identity.boot_id != ""


def test_on_start_failure_kills_child_and_reraises(tmp_path: Path) -> None:
    pids: list[int] = []

    def on_start(identity: ProcessIdentity) -> None:
        pids.append(identity.pid)
        raise RuntimeError("database is gone")

    woke = tmp_path / "woke"
    with pytest.raises(RuntimeError, match="database is gone"):
        run(sleeper(woke), tmp_path, on_start=on_start)
    assert not pid_alive(pids[0])
    assert not woke.exists()  # killed at once, not waited for


def _orphan(tmp_path: Path, script: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["/bin/sh", "-c", script],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _identity_of(pid: int) -> ProcessIdentity:
    return ProcessIdentity(
        pid=pid, pgid=pid, start_time=process_start_time(pid), host=host_name(), boot_id=boot_id()
    )


def test_kill_process_group_refuses_mismatches(tmp_path: Path) -> None:
    proc = _orphan(tmp_path, "sleep 30")
    try:
        real = _identity_of(proc.pid)
        assert real.start_time is not None
        for wrong in (
            ProcessIdentity(real.pid, real.pgid, "1", real.host, real.boot_id),
            ProcessIdentity(real.pid, real.pgid, None, real.host, real.boot_id),
            ProcessIdentity(real.pid, real.pgid, real.start_time, "other-host", real.boot_id),
            ProcessIdentity(real.pid, real.pgid, real.start_time, real.host, "other-boot"),
        ):
            assert kill_process_group(wrong, grace=0.1) is False
        assert pid_alive(proc.pid)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_kill_process_group_never_signals_own_group() -> None:
    me = os.getpid()
    ours = ProcessIdentity(me, os.getpgrp(), process_start_time(me), host_name(), boot_id())
    assert kill_process_group(ours, grace=0.1) is False


def test_kill_process_group_kills_matching_group(tmp_path: Path, stray_pids: list[int]) -> None:
    pidfile = tmp_path / "gc.pid"
    proc = _orphan(tmp_path, f"sleep {LONG} & echo $! > {pidfile}; wait")
    try:
        grandchild = read_pid(pidfile)
        stray_pids.append(grandchild)
        assert kill_process_group(_identity_of(proc.pid), grace=2.0) is True
        assert proc.wait(timeout=PATIENCE) == -signal.SIGTERM
        assert wait_for(lambda: not pid_alive(grandchild))
    finally:
        proc.kill()
        proc.wait()


def test_kill_process_group_escalates(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    proc = _orphan(tmp_path, f"trap '' TERM; touch {ready}; while :; do sleep 0.1; done")
    try:
        assert wait_for(ready.exists)
        assert kill_process_group(_identity_of(proc.pid), grace=0.3) is True
        # It ignores SIGTERM and loops for ever: only the escalation ends it.
        assert proc.wait(timeout=PATIENCE) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()


def test_kill_process_group_on_dead_pid_is_quiet(tmp_path: Path) -> None:
    proc = _orphan(tmp_path, "exit 0")
    identity = _identity_of(proc.pid)
    proc.wait()
    assert kill_process_group(identity, grace=0.1) is False
    assert not pid_alive(proc.pid)


def test_pid_alive_basics() -> None:
    assert pid_alive(os.getpid())
    assert not pid_alive(0)
    assert not pid_alive(-1)


# --------------------------------------------------------------------------- concurrency


def test_parallel_calls_from_threads(tmp_path: Path) -> None:
    barrier = threading.Barrier(4)

    def one(i: int) -> ProcessResult:
        barrier.wait()
        code = f"import sys, time; time.sleep(0.2); print({i}); sys.stderr.write('e{i}')"
        return run(py(code), tmp_path)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(one, range(4)))
    for i, result in enumerate(results):
        assert result.ok
        assert result.stdout == f"{i}\n"
        assert result.stderr == f"e{i}"


def test_on_start_after_skips_quick_commands(tmp_path: Path) -> None:
    seen: list[ProcessIdentity] = []
    quick = run(["/bin/true"], tmp_path, on_start=seen.append, on_start_after=5.0)
    assert quick.exit_code == 0 and seen == []
    assert quick.identity is not None and quick.identity.start_time is None
    slow = run(
        py("import time; time.sleep(0.3)"), tmp_path, on_start=seen.append, on_start_after=0.05
    )
    assert slow.exit_code == 0
    [identity] = seen
    assert slow.identity == identity
    assert identity.start_time is not None
