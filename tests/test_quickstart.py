"""The README's Quickstart, run verbatim in a fresh HOME: the commands a
newcomer copies must work as written. Only what cannot run here is stood in
for: the install path is this checkout, `$EDITOR` is `true`, `claude` and
`codex` are small scripts (they answer `--version` and `--help`; the
research "agent" writes RESEARCH.md with the sections the judge wants),
`crontab` keeps its table in a file, and the new
virtual environment sees this one's packages through a .pth file so that
`pip install --no-deps` needs no network for the dependencies."""

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


def adapt(command: str) -> str:
    command = command.replace("/path/to/orchestrator", shlex.quote(str(ROOT)))
    return command.replace(
        "~/.venvs/orch/bin/pip install ",
        '~/.venvs/orch/bin/python -c "$WRITE_PTH" && ~/.venvs/orch/bin/pip install -q --no-deps ',
    )


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
    script = "set -e\n" + "".join(f"echo '>>> {i}'\n{adapt(c)}\n" for i, c in enumerate(commands))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORCHESTRATOR_", "VIRTUAL"))}
    env.update(
        HOME=str(home),
        EDITOR="true",
        WRITE_PTH=WRITE_PTH,
        PATH=f"{stubs}:/usr/local/bin:/usr/bin:/bin",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
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
    out = done.stdout
    project = home / "projects" / "myapp-tasks"
    assert (project / "orchestrator.toml").is_file()
    assert "0 failed" in out  # doctor: every check ok or a warning
    assert re.search(r"fix-login: research attempt 1 passed .*-> research:awaiting_approval", out)
    assert "fix-login: approved research" in out
    installed = (home / "crontab.txt").read_text()
    assert f"# orchestrator-cron {project / 'orchestrator.toml'}" in installed
    assert str(home / ".venvs" / "orch" / "bin" / "orchestrator") in installed
    assert sys.executable not in installed  # the Quickstart's own installation ticks
