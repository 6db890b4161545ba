"""What a sandboxed command sees: the one place its walls are decided, for
an attempt's commands, `calibrate` and the land check (`wrapping.py`).

An allow-list: the project's folders (the config's folder, workspace_root,
state_root, every pipeline's repository) are hidden whole, the env file
and the database hidden wherever they are; then bound back only what this
command needs: its own workspace and state folder (writable), the files
its config argv names (a judge, a prompt), the repository's git data
minus the other worktrees' folders, and the stage's `sandbox_ro` and
`sandbox_rw` (read-only). The table in docs/how-to/sandbox.md says it to
users; `tests/e2e/test_sandbox_hostile.py` lists the mounts from inside.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from orchestrator.config import PipelineConfig, Settings
from orchestrator.features.sandbox import bwrap
from orchestrator.features.sandbox.config import SandboxConfig
from orchestrator.storage.db import sqlite_path
from orchestrator.workspace.gitrun import GitError
from orchestrator.workspace.worktree import Worktree

# Beside a SQLite file, what SQLite writes next to it.
_SQLITE_SIDES = ("", "-wal", "-shm", "-journal")


def command_walls(
    settings: Settings,
    pipeline: PipelineConfig | None,
    config: SandboxConfig,
    *,
    workspace: Path,
    state_dir: Path,
    template: Sequence[str] = (),
) -> bwrap.Walls:
    """The walls of one command running in `workspace`, writing `state_dir`.
    `template` is its argv as the config writes it: the files it names
    (with `{config_dir}` filled, nothing an agent wrote) are bound back."""
    protected = _protected_files(settings)
    hidden = _project_folders(settings)
    readable: list[Path] = []
    git_hidden: list[Path] = []
    if pipeline is not None and pipeline.repository is not None:
        common = pipeline.repository / ".git"
        readable.append(common)  # objects and refs: git runs in the worktree
        git_hidden.append(common / "worktrees")  # but no other worktree's folder
        # Not a worktree (yet): no git folder of its own to see.
        with contextlib.suppress(GitError, OSError):
            readable.append(Worktree(pipeline.repository, workspace, "", "").admin_dir())
    readable += _named(template, settings.base_dir, hidden, protected)
    return bwrap.Walls(
        writable=(workspace, state_dir),
        readable=tuple(readable),
        ro=config.ro,
        rw=config.rw,
        network=config.network,
        tmp_mb=config.tmp_mb,
        hidden=(*hidden, *git_hidden),
        masked=protected,
    )


def _project_folders(settings: Settings) -> tuple[Path, ...]:
    folders = [settings.base_dir, settings.workspace_root, settings.state_root]
    if settings.config_path is not None:
        folders.append(settings.config_path.parent)
    folders += [p.repository for p in settings.pipelines.values() if p.repository is not None]
    return tuple(dict.fromkeys(_real(folder) for folder in folders))


def _protected_files(settings: Settings) -> tuple[Path, ...]:
    """The files no command sees wherever they are: the config, the env
    file (every stage's secrets), the database (every task's text and
    verdicts) and what SQLite keeps beside it."""
    files = [settings.config_path, settings.env_file]
    database = sqlite_path(settings.database_url)
    if database is not None:
        files += [database.with_name(database.name + side) for side in _SQLITE_SIDES]
    return tuple(_real(path) for path in files if path is not None)


def _named(
    template: Sequence[str], base_dir: Path, hidden: Sequence[Path], protected: Sequence[Path]
) -> Iterator[Path]:
    """The paths the config's argv names inside a hidden folder: a file, or
    a folder holding nothing protected and no hidden folder."""
    rendered = [arg.replace("{config_dir}", str(base_dir)) for arg in template]
    for arg in rendered:
        for candidate in {arg, arg.partition("=")[2]}:
            if not candidate.startswith("/") or "\0" in candidate:
                continue
            path = _real(Path(candidate))
            if not any(path == h or h in path.parents for h in hidden):
                continue  # visible anyway, or not the project's
            if path in protected or path in hidden:
                continue
            if path.is_dir() and any(path in p.parents for p in (*protected, *hidden)):
                continue
            if path.exists():
                yield path


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))
