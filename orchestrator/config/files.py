"""Finding, reading and fingerprinting the config file, and anchoring database paths.

A relative path means "beside the file" or "here", never wherever cron
happened to start, so every path is made absolute as soon as it is read.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.config.model import CONFIG_ENV, DEFAULT_CONFIG_NAME
from orchestrator.errors import ConfigError


def find_config(explicit: str | Path | None, environ: Mapping[str, str], cwd: Path) -> Path | None:
    """Return the config to use, or None; a file the user named must exist.

    An empty ORCHESTRATOR_CONFIG counts as unset, as shells make `VAR=` easy
    to leave behind. Only the current folder is searched (no walking up):
    cron runs with an arbitrary cwd, and a config picked up from a parent
    folder would be a surprise.
    """
    if explicit is not None and str(explicit) != "":
        path = _absolute(Path(explicit), cwd)
        if not path.exists():
            raise ConfigError(f"{path}: config file not found (given by --config)")
        return path
    from_env = environ.get(CONFIG_ENV, "")
    if from_env:
        path = _absolute(Path(from_env), cwd)
        if not path.exists():
            raise ConfigError(f"{path}: config file not found (given by {CONFIG_ENV})")
        return path
    local = _absolute(Path(DEFAULT_CONFIG_NAME), cwd)
    return local if local.is_file() else None


def config_fingerprint(path: Path | None) -> str:
    """Hash the file so a long tick can notice an edit and stop claiming.

    A file that vanished or became unreadable gets "" rather than an error:
    the caller only compares fingerprints, and a difference is the signal.
    """
    if path is None:
        return ""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        raise ConfigError(f"{path}: cannot read the config file: {reason}") from exc


def _parse(path: Path, raw: bytes) -> dict[str, Any]:
    try:
        # utf-8-sig: a BOM left by a Windows editor is harmless, not a syntax error.
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text: {exc}") from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    except ValueError as exc:  # an integer past int()'s digit limit, raised inside tomllib
        raise ConfigError(f"{path}: invalid TOML: {str(exc).partition(':')[0]}") from exc


def _absolute(path: Path, base: Path) -> Path:
    """Absolute and `..`-free, without resolving symlinks (they are the user's layout)."""
    return Path(os.path.normpath(base.absolute() / path.expanduser()))


def resolve_database_url(url: str, base: Path) -> str:
    """Anchor a relative SQLite path at `base`, so the database does not follow the cwd.

    `sqlite:///x.db` is relative and becomes `sqlite:////abs/x.db`; the query
    string is kept. In-memory databases, SQLite URI filenames (`file:`),
    absolute paths and other databases are returned unchanged.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.split("+", 1)[0].lower() != "sqlite" or not rest.startswith("/"):
        return url
    location, qmark, query = rest[1:].partition("?")
    if location in ("", ":memory:") or location.startswith(("/", "file:")):
        return url
    # SQLAlchemy percent-decodes the database part, so the folder we add must be
    # encoded; the user's own part already is.
    anchor = str(base).replace("%", "%25").replace("?", "%3F")
    absolute = os.path.normpath(f"{anchor.rstrip('/')}/{location}")
    return f"{scheme}:///{absolute}{qmark}{query}"
