"""The child's argv and environment: placeholders substituted in one pass, values cleaned.

Argv and environment values come from verdict hints and task fields, which the
agent controls; a NUL or a lone surrogate would make `Popen` raise, so they are
cleaned and capped here, before any process is started.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence

from orchestrator.domain.text import clean_text

PLACEHOLDERS = (
    "task",
    "stage",
    "attempt",
    "workspace",
    "prompt_file",
    "hint",
    "config_dir",
    "context_file",
    "prev_session",
    "candidate",
    "feedback",
)
MAX_VALUE_BYTES = 8192
_PLACEHOLDER_RE = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
_ORCHESTRATOR_PREFIX = "ORCHESTRATOR_"


def render_argv(template: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """Fill the placeholders, leaving every other brace alone.

    A missing value renders as the empty string: the tick always passes every
    one, and an empty argument is easier to diagnose than a crashed tick. The
    literal parts are cleaned too (without a cap), so a NUL in a config string
    cannot make the spawn raise.
    """
    cleaned = {name: clean_text(values.get(name, ""), MAX_VALUE_BYTES) for name in PLACEHOLDERS}

    def substitute(match: re.Match[str]) -> str:
        return cleaned[match.group(1)]

    return [clean_text(_PLACEHOLDER_RE.sub(substitute, arg)) for arg in template]


def _denied(name: str, deny: Sequence[str]) -> bool:
    """Exact names, or shell-style patterns such as ``*_TOKEN`` (case-sensitive)."""
    return any(name == pattern or fnmatch.fnmatchcase(name, pattern) for pattern in deny)


def _env_name_usable(name: str) -> bool:
    # Popen refuses names that are empty or hold "=" or NUL; drop them rather than fail.
    return bool(name) and "\x00" not in name and "=" not in name


def child_environment(
    base: Mapping[str, str],
    *,
    deny: Iterable[str],
    extra: Mapping[str, str],
    orchestrator_vars: Mapping[str, str],
) -> dict[str, str]:
    """Build the child's environment in three layers, most trusted last.

    Every inherited ``ORCHESTRATOR_*`` name is dropped, not only the database
    URL and config path: a child must never see our credentials, and a stale
    ``ORCHESTRATOR_TASK`` from an outer run must not leak through. The stage's
    ``extra`` cannot set ``ORCHESTRATOR_*`` names either (the namespace is ours,
    and the human-command guard relies on it); ``orchestrator_vars`` then sets
    exactly the names the tick chose.
    """
    patterns = tuple(deny)
    env: dict[str, str] = {}
    for name, value in base.items():
        if name.startswith(_ORCHESTRATOR_PREFIX) or _denied(name, patterns):
            continue
        _put(env, name, value)
    for name, value in extra.items():
        if not name.startswith(_ORCHESTRATOR_PREFIX):
            _put(env, name, value)
    for name, value in orchestrator_vars.items():
        _put(env, name, value)
    return env


def _put(env: dict[str, str], name: str, value: str) -> None:
    if not _env_name_usable(name):
        return
    env[clean_text(name, MAX_VALUE_BYTES)] = clean_text(value, MAX_VALUE_BYTES)
