"""The tutorial, run as written in a fresh HOME: its shell blocks are the
commands, and a block under `<!-- file: PATH -->` is written to PATH (in
the folder the commands are in by then). Only what cannot run here is
stood in for: the tutorial's repository's venv sees this one's packages
(pytest) through a .pth file instead of installing from the network, and
`crontab` keeps its table in a file, and git is given the identity a
reader's own configuration would hold."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "docs" / "tutorial.md"
BLOCK = re.compile(r"(?:<!-- file: (?P<file>\S+) -->\n)?```(?P<lang>\w+)\n(?P<body>.*?)```", re.S)
CRONTAB = """#!/bin/sh
if [ "$1" = "-l" ]; then
    if [ -f "$HOME/crontab.txt" ]; then cat "$HOME/crontab.txt"; exit 0; fi
    echo "no crontab for you" >&2; exit 1
fi
[ "$1" = "-" ] && cat > "$HOME/crontab.txt"
"""
PURELIB = sysconfig.get_paths()["purelib"]
NO_NETWORK = (
    '.venv/bin/python -c "import sysconfig, pathlib; pathlib.Path(sysconfig.get_paths()'
    f"['purelib'], 'tests-deps.pth').write_text({PURELIB!r})\""
)


def tutorial_script() -> str:
    """The tutorial as one shell script: files written, commands run."""
    lines = ["set -e"]
    for number, block in enumerate(BLOCK.finditer(TUTORIAL.read_text(encoding="utf-8"))):
        body = block["body"]
        if block["file"]:
            path = shlex.quote(block["file"])
            lines += [
                f'mkdir -p "$(dirname {path})"',
                f"cat > {path} <<'TUTORIAL_EOF'",
                body + "TUTORIAL_EOF",
            ]
        elif block["lang"] == "sh":
            lines.append(f"echo '>>> block {number}'")
            lines.append(body.replace(".venv/bin/pip install -q pytest", NO_NETWORK))
    return "\n".join(lines) + "\n"


def test_the_tutorial_has_its_files_and_commands() -> None:
    blocks = list(BLOCK.finditer(TUTORIAL.read_text(encoding="utf-8")))
    files = {b["file"] for b in blocks if b["file"]}
    assert files == {"orchestrator.toml", "prompts/fix.md", "stand-in-agent.sh"}
    assert NO_NETWORK in tutorial_script(), "the install line the test stands in for is gone"


@pytest.mark.slow
def test_the_tutorial_runs_as_written_in_a_fresh_home(tmp_path: Path) -> None:
    home, stubs = tmp_path / "home", tmp_path / "stubs"
    home.mkdir()
    stubs.mkdir()
    (stubs / "crontab").write_text(CRONTAB)
    (stubs / "crontab").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORCHESTRATOR_", "VIRTUAL"))}
    env.update(
        HOME=str(home),
        PATH=f"{stubs}:{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        GIT_CONFIG_NOSYSTEM="1",
        # The reader's own git identity, which a fresh HOME lacks.
        GIT_AUTHOR_NAME="reader",
        GIT_AUTHOR_EMAIL="reader@example.com",
        GIT_COMMITTER_NAME="reader",
        GIT_COMMITTER_EMAIL="reader@example.com",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    done = subprocess.run(
        ["bash", "-c", tutorial_script()],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, (done.stdout[-4000:], done.stderr[-4000:])
    out = done.stdout
    assert "0 failed" in out  # doctor: warnings allowed, no failure
    assert re.search(r"fix-greeting: implement attempt 1 failed", out)
    assert re.search(
        r"fix-greeting: implement attempt 2 passed .*-> implement:awaiting_approval", out
    )
    assert "fix-greeting: approved implement" in out
    assert "1 passed" in out  # the merged change passes the repository's tests
    greet = (home / "projects" / "greet" / "greet.py").read_text()
    assert '"Hello, " + name + "!"' in greet
    assert "# orchestrator-cron" in (home / "crontab.txt").read_text()
