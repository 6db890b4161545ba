"""git for the orchestrator's own steps (worktrees, stage commits), with
nothing the repository's config names run: no hooks, no fsmonitor, no
pager, no filter drivers, no signing program, no system or global config.

The repository is the user's, but a worker can write its `.git/config` as
easily as its files; a step the tick takes must not run a command the
worker chose, nor see the tick's environment.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from orchestrator.errors import OrchestratorError

TIMEOUT = 120.0
SAFE_CONFIG = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.attributesFile=/dev/null",
    "core.sshCommand=false",
    "credential.helper=",
    "diff.external=",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "gpg.program=false",
    "core.editor=false",
    "sequence.editor=false",
    "protocol.allow=never",
    "advice.detachedHead=false",
    "init.defaultBranch=main",
)
_KEPT_ENV = ("PATH", "HOME", "LANG", "TMPDIR", "USER", "LOGNAME")


class GitError(OrchestratorError):
    """A git step of the orchestrator's own failed (exit 1, one line)."""


def git_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _KEPT_ENV}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_TERMINAL_PROMPT="0",
        GIT_PAGER="cat",
        LC_ALL="C",
    )
    env.update(extra or {})
    return env


def _filter_overrides(base: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """`-c filter.X.clean=` (and smudge, process) for each driver the config
    names: git runs no command for an empty one."""
    done = subprocess.run(
        [*base, "config", "--name-only", "--get-regexp", r"^filter\."],
        capture_output=True,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        timeout=TIMEOUT,
        check=False,
    )
    drivers = {
        key.removeprefix("filter.").rpartition(".")[0]
        for key in done.stdout.decode("utf-8", "replace").splitlines()
    }
    out: list[str] = []
    for driver in sorted(d for d in drivers if d):
        for setting in ("clean=", "smudge=", "process=", "required=false"):
            out += ["-c", f"filter.{driver}.{setting}"]
    return out


def run_git(
    where: Path,
    args: Sequence[str],
    *,
    git_dir: Path | None = None,
    work_tree: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
) -> str:
    """git's stdout; GitError with git's last line when it fails."""
    environment = git_environment(env)
    base = ["git", "--no-pager", "-C", str(where)]
    if git_dir is not None:
        base.append(f"--git-dir={git_dir}")
    if work_tree is not None:
        base.append(f"--work-tree={work_tree}")
    for pair in SAFE_CONFIG:
        base += ["-c", pair]
    argv = [*base, *_filter_overrides(base, environment), *args]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            env=environment,
            input=stdin.encode() if stdin is not None else None,
            stdin=subprocess.DEVNULL if stdin is None else None,
            timeout=TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git {args[0]} in {where} took longer than {TIMEOUT:.0f} s") from exc
    except OSError as exc:
        raise GitError(f"cannot run git: {exc}") from exc
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines() or ["(no message)"]
        raise GitError(f"git {args[0]} failed in {where}: {lines[-1]}")
    return done.stdout.decode("utf-8", "surrogateescape")
