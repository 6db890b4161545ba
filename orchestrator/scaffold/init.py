"""`orchestrator init`: the commented config, prompts and judges, then the database.

The files come from `orchestrator/templates/`, shipped in the wheel, so a
non-editable install writes the same project as a checkout.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from orchestrator.agents import recipes
from orchestrator.config import (
    Settings,
    load_settings,
)
from orchestrator.errors import RefusedError
from orchestrator.workspace.gitrun import GitError
from orchestrator.workspace.worktree import repository_root

Say = Callable[[str], None]
Table = Callable[[Sequence[str], Sequence[Sequence[Any]]], str]
INIT_PROMPTS = (
    "research",
    "implement",
    "code_review",
    "bug_find",
    "adversarial_bug_find",
    "doc_review",
    "referee",
)
INIT_JUDGES = ("pytest_judge.py", "sections_judge.py", "pr_checks_judge.py")
_JUDGE = re.compile(r"@JUDGE:([A-Za-z0-9_.]+)@")


def _template(*parts: str) -> Traversable:
    node = resources.files("orchestrator") / "templates"
    for part in parts:
        node = node / part
    return node


def toml_string(value: str) -> str:
    """A TOML basic string: quote, backslash and control characters escaped."""

    def escape(ch: str) -> str:
        if ch in '"\\':
            return "\\" + ch
        if ord(ch) < 0x20 or ord(ch) == 0x7F:
            return f"\\u{ord(ch):04x}"
        return ch

    return '"' + "".join(escape(ch) for ch in value) + '"'


@dataclass(frozen=True)
class InitResult:
    settings: Settings
    written: tuple[Path, ...]
    kept: tuple[Path, ...]
    revision_before: str | None
    revision: str | None
    backup: Path | None = None


def render_init_config(folder: Path) -> str:
    """The init config, with the judges' absolute paths under `folder`.

    Commands run in each task's workspace, so a relative script path there
    would be looked up in the workspace, not beside the config.
    """
    text = _template("init", "orchestrator.toml").read_text(encoding="utf-8")
    judges = folder / "judges"
    return _JUDGE.sub(lambda m: toml_string(str(judges / m.group(1))), text)


REPOSITORY_LINE = '# repository = "/path/to/your/repo"'


def with_repository(text: str, repository: Path) -> str:
    """The config with its `repository` line set (`init --repository`): the
    top of the repository at that path, absolute, so tasks are branches of it."""
    try:
        root = repository_root(repository.absolute())
    except GitError as exc:
        raise RefusedError(f"--repository {repository}: {exc}") from exc
    assert REPOSITORY_LINE in text, "every init recipe has the commented repository line"
    return text.replace(REPOSITORY_LINE, f"repository = {toml_string(str(root))}", 1)


LAND_RECIPES = ("merge", "pr")


def with_landing(text: str, land: str) -> str:
    """The config with the landing keys of `land` under its `repository`
    line (`init --land`), which `with_repository` has set."""
    if land not in LAND_RECIPES:
        raise RefusedError(f"--land {land!r}: choose one of {', '.join(LAND_RECIPES)}")
    block = _template("init", "land", f"{land}.toml").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("repository = "))
    return "".join([*lines[: at + 1], block, *lines[at + 1 :]])


def init_project(
    config_path: Path,
    *,
    force: bool,
    db_url: str | None,
    environ: dict[str, str] | None = None,
    agent: str | None = None,
    repository: Path | None = None,
    land: str | None = None,
    mcp: bool = False,
    sandbox: bool = False,
) -> InitResult:
    """Write the config, prompts and judges; create or migrate the database.

    An existing config is refused unless `force`; existing prompt and judge
    files are always kept (they are the user's edits), and reported as kept.
    """
    config_path = Path(os.path.normpath(config_path.absolute()))
    if land is not None and repository is None:
        raise RefusedError(f"--land {land} needs --repository (a landing lands into a repository)")
    if config_path.is_dir():
        raise RefusedError(f"{config_path} is a folder; give --config a file path")
    if config_path.exists() and not force:
        raise RefusedError(
            f"{config_path} already exists; pass --force to replace it with the default "
            "(the old one is kept as a .bak file; prompts and judges you edited are kept)"
        )
    folder = config_path.parent
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    kept: list[Path] = []
    text = render_init_config(folder) if agent is None else recipes.recipe_text(agent)
    if repository is not None:
        text = with_repository(text, repository)
    if land is not None:
        text = with_landing(text, land)
    if mcp:  # `--mcp`: the agents reach `orchestrator mcp` (mcp.recipe)
        from orchestrator.mcp.recipe import (
            MCP_FILE,
            mcp_config,
            with_mcp,
            with_sandboxed_mcp,
        )

        text = with_mcp(text, agent)
        target = folder / MCP_FILE
        (written if _write_new(target, mcp_config(config_path)) else kept).append(target)
    if sandbox:
        if agent is None:
            raise RefusedError("--sandbox needs --agent (it maps that agent's folders)")
        from orchestrator.features.sandbox.scaffold import with_sandbox

        # With --mcp, the server mcp.json names must start inside the sandbox.
        text = with_sandboxed_mcp(with_sandbox(text, agent)) if mcp else with_sandbox(text, agent)
    backup = _backup(config_path) if config_path.exists() else None
    config_path.write_text(text, encoding="utf-8")
    written.append(config_path)
    for body, relative in [] if agent is None else recipes.extra_files(agent):
        target = folder / relative
        if _write_new(target, body):
            target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
            written.append(target)
        else:
            kept.append(target)
    for name in INIT_PROMPTS:
        target = folder / "prompts" / f"{name}.md"
        source = _template("init", "prompts", f"{name}.md")
        (written if _write_new(target, source.read_text(encoding="utf-8")) else kept).append(target)
    for name in INIT_JUDGES:
        target = folder / "judges" / name
        source = _template("init", "judges", name)
        if _write_new(target, source.read_text(encoding="utf-8")):
            target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
            written.append(target)
        else:
            kept.append(target)
    settings = load_settings(config=config_path, db_url=db_url, environ=environ)
    before, after = _create_database(settings)
    return InitResult(settings, tuple(written), tuple(kept), before, after, backup)


def _backup(path: Path) -> Path:
    """Keep the config `--force` replaces: it holds the user's edits.

    `orchestrator.toml.bak`, or `.bak.1`, `.bak.2`… when that is taken, so a
    second `init --force` never overwrites the first backup.
    """
    target = path.with_name(path.name + ".bak")
    number = 0
    while target.exists() or target.is_symlink():
        number += 1
        target = path.with_name(f"{path.name}.bak.{number}")
    shutil.copy2(path, target)
    return target


def _write_new(target: Path, text: str) -> bool:
    if target.exists():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return True


def _create_database(settings: Settings) -> tuple[str | None, str | None]:
    """Create the database or bring it to head, holding the tick lock meanwhile."""
    from orchestrator.locking import TickLock
    from orchestrator.storage import migrate
    from orchestrator.storage.db import make_engine

    engine = make_engine(settings.database_url, busy_timeout=settings.busy_timeout, create=True)
    try:
        with TickLock(settings.lock_file):
            before = migrate.current(engine)
            migrate.upgrade(engine)
            return before, migrate.current(engine)
    finally:
        engine.dispose()
