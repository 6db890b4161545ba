"""The real agent CLIs, installed once into a cache outside the repository,
and the scripted model server they talk to instead of the internet.

Claude Code and Codex CLI come from npm at pinned versions, aider from PyPI
into a venv of its own; each into `$XDG_CACHE_HOME/orchestrator-tests/`
(else `~/.cache/orchestrator-tests/`), under a file lock so parallel
workers do not race, and marked complete only once the install finished.
Without npm or the network the tests skip with the reason; with CI=true
they fail instead: CI must run them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock
from stub_model import StubModel

NPM_PINS = {
    "claude": ("@anthropic-ai/claude-code", "2.1.197"),
    "codex": ("@openai/codex", "0.171.0"),
}
AIDER_PIN = "aider-chat==0.86.2"
INSTALL_TIMEOUT = 900.0
DONE = ".installed"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    root = Path(base) / "orchestrator-tests"
    root.mkdir(parents=True, exist_ok=True)
    return root


def unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: the real agent CLIs must run)")
    pytest.skip(reason)


def _install(folder: Path, steps: list[list[str]], what: str) -> None:
    """Run `steps` into `folder` once; a failed or interrupted install is
    removed, so the next run starts clean."""
    if (folder / DONE).is_file():
        return
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for step in steps:
        try:
            done = subprocess.run(  # noqa: PLW1510 - the caller checks returncode
                step, cwd=folder, capture_output=True, text=True, timeout=INSTALL_TIMEOUT
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            shutil.rmtree(folder, ignore_errors=True)
            unavailable(f"installing {what} failed: {exc}")
            return
        if done.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            unavailable(f"installing {what} failed: {(done.stderr or done.stdout)[-800:]}")
    (folder / DONE).write_text(what)


def npm_agent(name: str) -> Path:
    package, version = NPM_PINS[name]
    npm = shutil.which("npm")
    if npm is None:
        unavailable(f"npm is not on PATH; cannot install {package}@{version}")
    assert npm is not None
    root = cache_root()
    folder = root / "npm" / f"{package.rsplit('/', 1)[-1]}-{version}"
    with FileLock(str(root / f"{name}.lock")):
        _install(
            folder,
            [[npm, "install", "--no-audit", "--no-fund", "--prefix", ".", f"{package}@{version}"]],
            f"{package}@{version}",
        )
    program = folder / "node_modules" / ".bin" / name
    if not program.exists():
        unavailable(f"{package}@{version} installed no {name} program")
    return program


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    return npm_agent("claude")


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    return npm_agent("codex")


@pytest.fixture(scope="session")
def aider_bin() -> Path:
    """aider in a venv of its own (it pins most of its dependencies); its
    install takes about a minute here."""
    root = cache_root()
    folder = root / "pypi" / AIDER_PIN.replace("==", "-")
    with FileLock(str(root / "aider.lock")):
        _install(
            folder,
            [
                [sys.executable, "-m", "venv", "."],
                [str(folder / "bin" / "python"), "-m", "pip", "install", "-q", AIDER_PIN],
            ],
            AIDER_PIN,
        )
    return folder / "bin" / "aider"


@pytest.fixture
def stub() -> Iterator[StubModel]:
    model = StubModel().start()
    try:
        yield model
    finally:
        model.stop()
