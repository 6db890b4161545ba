"""The README's Quickstart, run verbatim in a fresh HOME: the commands a
newcomer copies must work as written. Only what cannot run here is stood in
for: the install path is this checkout, `$EDITOR` is `true`, `claude` and
`codex` are small scripts (they answer `--version` and `--help`; the
research "agent" writes RESEARCH.md with the sections the judge wants),
`crontab` keeps its table in a file, `serve` gets a free port and its pid
is noted so that the test can stop it, and the new virtual environment sees
this one's packages through a .pth file so that `pip install --no-deps`
needs no network for the dependencies."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The research "agent" writes the three sections, 20 words or more each.
SECTION = " ".join(["the session timeout lives in one setting and one test"] * 3)
# `doctor` asks each agent CLI for its version and its flags.
ANSWERS = (
    'case "$*" in *--version*) echo "stub 1.0"; exit 0;; *--help*) '
    'echo "-p --output-format --permission-mode exec -s --skip-git-repo-check"; exit 0;; esac\n'
)
STUBS = {
    "claude": "#!/bin/sh\n"
    + ANSWERS
    + "cat > /dev/null\nprintf '"
    + "".join(f"## {name}\\n{SECTION}\\n" for name in ("Scope", "Plan", "Risks"))
    + "' > RESEARCH.md\n",
    "codex": "#!/bin/sh\n" + ANSWERS + 'cat > /dev/null\necho \'{"pass": true, "score": 1.0}\'\n',
    "crontab": """#!/bin/sh
if [ "$1" = "-l" ]; then
    if [ -f "$HOME/crontab.txt" ]; then cat "$HOME/crontab.txt"; exit 0; fi
    echo "no crontab for you" >&2; exit 1
fi
[ "$1" = "-" ] && cat > "$HOME/crontab.txt"
""",
}

# Run inside the new venv: its site-packages also reads this one's.
WRITE_PTH = (
    "import sysconfig, pathlib; "
    "pathlib.Path(sysconfig.get_paths()['purelib'], 'tests-deps.pth')"
    f".write_text({sysconfig.get_paths()['purelib']!r})"
)


def quickstart_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(blocks) == 2, "the Quickstart has its setup block and its cron block"
    commands = [line for line in blocks[0].splitlines() if line.strip()]
    commands += [line[2:] for line in blocks[1].splitlines() if line.startswith("$ ")]
    return commands


def adapt(command: str, port: int) -> str:
    command = command.replace("/path/to/orchestrator", shlex.quote(str(ROOT)))
    if command.startswith("orchestrator serve "):
        command = command.replace("serve ", f"serve --port {port} ", 1) + "\necho $! > serve.pid"
    return command.replace(
        "~/.venvs/orch/bin/pip install ",
        '~/.venvs/orch/bin/python -c "$WRITE_PTH" && ~/.venvs/orch/bin/pip install -q --no-deps ',
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def board_of(log: Path, deadline: float) -> str:
    """The board's HTML, once `serve` answers at the address it wrote to its
    log (polled, no fixed wait); its access token is sent as a Bearer."""
    while True:
        found = re.search(r"(http://\S+)/\?token=([A-Za-z0-9_-]+)", log.read_text())
        if found is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"serve wrote no address: {log.read_text()!r}")
            time.sleep(0.1)
            continue
        board = urllib.request.Request(
            found.group(1) + "/", headers={"Authorization": f"Bearer {found.group(2)}"}
        )
        try:
            with urllib.request.urlopen(board, timeout=5) as answer:
                return str(answer.read().decode("utf-8"))
        except (urllib.error.URLError, OSError):
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_the_quickstart_runs_verbatim_in_a_fresh_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    stubs = tmp_path / "stubs"
    for folder in (home, stubs):
        folder.mkdir()
    for name, body in STUBS.items():
        (stubs / name).write_text(body)
        (stubs / name).chmod(0o755)
    commands = quickstart_commands()
    assert any(c.startswith("mkdir -p ") for c in commands)
    assert any(c.startswith("orchestrator serve ") and "&" in c for c in commands)
    port = free_port()
    script = "set -e\n" + "".join(
        f"echo '>>> {i}'\n{adapt(c, port)}\n" for i, c in enumerate(commands)
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORCHESTRATOR_", "VIRTUAL"))}
    env.update(
        HOME=str(home),
        EDITOR="true",
        WRITE_PTH=WRITE_PTH,
        PATH=f"{stubs}:/usr/local/bin:/usr/bin:/bin",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    project = home / "projects" / "myapp-tasks"
    # The newcomer's own repository, which `init --repository` names.
    repository = home / "projects" / "myapp"
    repository.mkdir(parents=True)
    git = ["git", "-C", str(repository), "-c", "user.name=me", "-c", "user.email=me@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True, env=env)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "start"], check=True, env=env)
    try:
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert done.returncode == 0, (done.stdout[-4000:], done.stderr[-4000:])
        # `serve`, started by the Quickstart, answers with the board.
        board = board_of(project / "web.log", time.monotonic() + 60)
        assert 'data-slug="fix-login"' in board and "research:approved" in board
        assert re.search(r"last tick \d+ s ago", board), board
    finally:
        if (project / "serve.pid").is_file():
            stop(int((project / "serve.pid").read_text()))
    out = done.stdout
    assert (project / "orchestrator.toml").is_file()
    assert "0 failed" in out  # doctor: every check ok or a warning
    assert re.search(r"fix-login: research attempt 1 passed .*-> research:awaiting_approval", out)
    assert "fix-login: approved research" in out
    # A task is a branch: research's work is its first commit, shown by `show` and `diff`.
    assert f'repository = "{repository}"' in (project / "orchestrator.toml").read_text()
    assert "branch    task/fix-login (from main)" in out
    assert "+++ b/RESEARCH.md" in out
    log = subprocess.run(
        ["git", "-C", str(repository), "log", "--format=%s", "main..task/fix-login"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert log == "fix-login: research (attempt 1)\n"
    installed = (home / "crontab.txt").read_text()
    assert f"# orchestrator-cron {project / 'orchestrator.toml'}" in installed
    assert str(home / ".venvs" / "orch" / "bin" / "orchestrator") in installed
    assert sys.executable not in installed  # the Quickstart's own installation ticks
