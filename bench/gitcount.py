"""Git processes counted: a `git` first on PATH that notes its arguments
in a log and execs the real one. Counted on a run of its own, never on a
timed one: the wrapper is a shell and a process more per call.

The orchestrator gives git `PATH` from its own environment
(`gitrun.git_environment`), so a PATH with the wrapper's folder first
reaches every git call of an in-process landing and of a tick started as
a process alike."""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class GitCount:
    """The calls noted so far, one line each (the subcommand)."""

    def __init__(self, log: Path) -> None:
        self.log = log

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def __len__(self) -> int:
        return len(self.calls())


@contextmanager
def counting_git(folder: Path) -> Iterator[GitCount]:
    """Inside: `PATH` (of this process, so of what it starts too) finds the
    counting wrapper first. The real git is the one PATH found before."""
    real = shutil.which("git")
    if real is None:
        raise SystemExit("gitcount: no git on PATH")
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "calls.log"
    wrapper = folder / "git"
    # One line per call, its subcommand (the first word that is not an
    # option or `-C`'s folder): a commit message's own lines stay out.
    wrapper.write_text(
        "#!/bin/sh\n"
        "skip= sub=?\n"
        'for a in "$@"; do\n'
        '  if [ -n "$skip" ]; then skip=; continue; fi\n'
        "  case $a in -C|-c) skip=1 ;; -*) ;; *) sub=$a; break ;; esac\n"
        "done\n"
        f'printf "%s\\n" "$sub" >> {shlex.quote(str(log))}\n'
        f'exec {shlex.quote(real)} "$@"\n'
    )
    wrapper.chmod(0o755)
    before = os.environ.get("PATH", os.defpath)
    os.environ["PATH"] = f"{folder}{os.pathsep}{before}"
    try:
        yield GitCount(log)
    finally:
        os.environ["PATH"] = before
