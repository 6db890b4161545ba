"""Which verifier a figure is about.

Until pipeline versions are recorded per attempt, a verifier is known by
what the config says now: its argv, and the content of every script it
names inside the project (an argument that is a regular file under the
config's folder). Editing the script makes a new identity, so a figure is
never silently about two verifiers. This is the one function to replace
when attempts carry their pipeline's version."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from orchestrator import safefs
from orchestrator.config import StageConfig

SCRIPT_LIMIT = 4 * 1024 * 1024


@dataclass(frozen=True)
class VerifierIdentity:
    id: str
    argv: tuple[str, ...]
    scripts: tuple[tuple[str, str], ...]  # (path relative to the project, sha256)


def verifier_identity(stage: StageConfig, project: Path) -> VerifierIdentity | None:
    """The identity of `stage`'s verifier now; None for a stage without one."""
    if stage.verifier is None:
        return None
    root = project.resolve()
    scripts: list[tuple[str, str]] = []
    for arg in stage.verifier:
        found = _project_file(arg, root)
        if found is None:
            continue
        try:
            data = safefs.read_bytes(found, SCRIPT_LIMIT)
        except OSError:
            continue  # unreadable now: the argv alone names it
        scripts.append((found.relative_to(root).as_posix(), hashlib.sha256(data).hexdigest()))
    whole = json.dumps([list(stage.verifier), scripts], separators=(",", ":"))
    return VerifierIdentity(
        hashlib.sha256(whole.encode()).hexdigest()[:12], stage.verifier, tuple(scripts)
    )


def _project_file(arg: str, root: Path) -> Path | None:
    if not arg or "{" in arg or "\0" in arg:
        return None
    path = Path(arg) if Path(arg).is_absolute() else root / arg
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):
        return None
    if not resolved.is_relative_to(root) or not resolved.is_file():
        return None
    return resolved
