"""`orchestrator cron` checks the PATH it prints, as real processes: a
stage's command that PATH does not find is warned about, `--install`
refuses it without `--force`, and the PATH is printed with each folder once
and only absolute folders (a relative one would let a worker plant a program
that a later tick runs)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from support import run_orchestrator

FAKE_CRONTAB = """#!/bin/sh
if [ "$1" = "-l" ]; then
    if [ -f "$FAKE_CRONTAB_FILE" ]; then cat "$FAKE_CRONTAB_FILE"; exit 0; fi
    echo "no crontab for $(id -un)" >&2; exit 1
fi
if [ "$1" = "-" ]; then cat > "$FAKE_CRONTAB_FILE"; exit 0; fi
exit 2
"""


def executable(folder: Path, name: str, text: str = "#!/bin/sh\nexit 0\n") -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    (folder / name).chmod(0o755)


def orchestrator(folder: Path, path: str, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    env.update(PATH=path, FAKE_CRONTAB_FILE=str(folder.parent / "crontab.txt"))
    done = run_orchestrator(args, cwd=folder, env=env)
    return done.returncode, done.stdout, done.stderr


def project(tmp_path: Path) -> tuple[Path, Path]:
    """An `init` project (its stages run `claude`, `codex` and `python3`) and
    a bin folder holding a stand-in crontab and python3."""
    folder = tmp_path / "proj"
    folder.mkdir()
    bin_dir = tmp_path / "bin"
    executable(bin_dir, "crontab", FAKE_CRONTAB)
    executable(bin_dir, "python3", f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    code, _out, err = orchestrator(folder, f"{bin_dir}:/usr/bin:/bin", "init")
    assert code == 0, err
    return folder, bin_dir


def test_cron_warns_about_a_command_its_path_does_not_find(tmp_path: Path) -> None:
    folder, bin_dir = project(tmp_path)
    code, out, err = orchestrator(folder, f"{bin_dir}:/usr/bin:/bin", "cron")
    assert code == 0
    assert out.startswith(f"* * * * * PATH={bin_dir}:/usr/bin:/bin ")
    [warning] = [line for line in err.splitlines() if line.startswith("warning:")]
    assert "'claude' (default.research.worker" in warning and "'codex'" in warning
    assert "python3" not in warning and "crontab" not in warning


def test_cron_install_refuses_it_without_force(tmp_path: Path) -> None:
    folder, bin_dir = project(tmp_path)
    store = tmp_path / "crontab.txt"
    code, _out, err = orchestrator(folder, f"{bin_dir}:/usr/bin:/bin", "cron", "--install")
    assert code == 1
    assert err.startswith("Error: not found on the PATH the line carries: 'claude'")
    assert "--force" in err and not store.exists()
    code, out, _err = orchestrator(
        folder, f"{bin_dir}:/usr/bin:/bin", "cron", "--install", "--force"
    )
    assert code == 0 and out.startswith("installed in your crontab:")
    assert "orchestrator-cron" in store.read_text()


def test_cron_with_every_command_found_is_silent_and_prints_path_once(tmp_path: Path) -> None:
    folder, bin_dir = project(tmp_path)
    for agent in ("claude", "codex"):
        executable(bin_dir, agent)
    repeated = f"{bin_dir}:/usr/bin:{bin_dir}:/bin:/usr/bin"
    code, out, err = orchestrator(folder, repeated, "cron")
    assert code == 0 and "warning" not in err
    assert out.startswith(f"* * * * * PATH={bin_dir}:/usr/bin:/bin ")
    code, out, _err = orchestrator(folder, repeated, "cron", "--install")
    assert code == 0 and out.startswith("installed in your crontab:")


def test_cron_drops_relative_and_empty_path_entries_and_checks_only_the_printed_path(
    tmp_path: Path,
) -> None:
    folder, bin_dir = project(tmp_path)
    # Found only through the relative entries, against the current folder:
    # neither counts, as cron's tick would look in its own folder (or a
    # worker's planted one), not this one.
    executable(folder / "bin", "claude")
    executable(folder, "codex")
    path = f"bin:.:{bin_dir}::/usr/bin:./bin:/bin:"
    code, out, err = orchestrator(folder, path, "cron")
    assert code == 0, err
    assert out.startswith(f"* * * * * PATH={bin_dir}:/usr/bin:/bin ")
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    [dropped] = [line for line in warnings if "absolute" in line]
    assert "'bin'" in dropped and "'.'" in dropped and "'./bin'" in dropped
    assert "empty" in dropped
    [missing] = [line for line in warnings if "not found" in line]
    assert "'claude'" in missing and "'codex'" in missing
    code, _out, err = orchestrator(folder, path, "cron", "--install")
    assert code == 1 and "'claude'" in err and not (tmp_path / "crontab.txt").exists()
