"""The config as a full tick read it: the marker `remember` writes in the
state folder, and the facts an idle tick reads back from it while the
config, its hash, the database given and the env file are still the same.
"""

# os.path, not pathlib: importing pathlib would cost this path a tenth of its time.
# ruff: noqa: PTH100, PTH111, PTH118, PTH120, PTH123

from __future__ import annotations

import os

# Not `typing.TYPE_CHECKING`: importing typing (or pathlib) would cost this
# path a fifth of its time; the names below are for annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

MARKER = ".idle-tick"  # in the state folder: what a full tick read of the config
CONFIG_ENV = "ORCHESTRATOR_CONFIG"
DB_URL_ENV = "ORCHESTRATOR_DB_URL"


def _absolute(path: str, base: str) -> str:
    """config.files._absolute, on strings."""
    return os.path.normpath(os.path.join(os.path.abspath(base), os.path.expanduser(path)))


def _config_path(given: str, env: Mapping[str, str], cwd: str) -> str:
    """config.files.find_config: --config, else ORCHESTRATOR_CONFIG, else
    the working folder's (an empty value counts as unset)."""
    return _absolute(given or env.get(CONFIG_ENV, "") or "orchestrator.toml", cwd)


def _database_given(given: str, env: Mapping[str, str], cwd: str) -> str:
    """The database URL given outside the config (--db, else
    ORCHESTRATOR_DB_URL), anchored as config.loader anchors it; "" for none."""
    url = given or env.get(DB_URL_ENV, "")
    return anchored_url(url, os.path.abspath(cwd)) if url else ""


def anchored_url(url: str, base: str) -> str:
    """config.files.resolve_database_url, on strings (tests hold the two to
    one answer): a relative SQLite path is anchored at `base`."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.split("+", 1)[0].lower() != "sqlite" or not rest.startswith("/"):
        return url
    location, qmark, query = rest[1:].partition("?")
    if location in ("", ":memory:") or location.startswith(("/", "file:")):
        return url
    anchor = base.replace("%", "%25").replace("?", "%3F").rstrip("/")
    absolute = os.path.normpath(f"{anchor}/{location}")
    return f"{scheme}:///{absolute}{qmark}{query}"


def read_facts(env: Mapping[str, str], cwd: str, config: str, db: str) -> Mapping[str, str] | None:
    """What the full tick read of this config (`remember`), when it still holds.

    The marker is looked for in the default state folder first, where the
    config's hash alone vouches for it (a config with those bytes puts its
    state there); only a config that moved its state folder is parsed, for
    the `state_root` it names (tomllib costs this path a third of its time)."""
    path = _config_path(config, env, cwd)
    with open(path, "rb") as file:
        raw = file.read()
    fingerprint = _sha256(raw)
    home = os.path.dirname(path)
    state_root = _absolute("state", home)
    facts = _read_marker(state_root)
    if facts is None or facts.get("fingerprint") != fingerprint:
        import tomllib

        data = tomllib.loads(raw.decode("utf-8-sig"))
        state = data.get("orchestrator", {}).get("state_root", "state")
        if not isinstance(state, str):
            return None
        state_root = _absolute(state, home)
        facts = _read_marker(state_root)
        if facts is None:
            return None
    expected = {
        "config": path,
        "fingerprint": fingerprint,
        "db": _database_given(db, env, cwd),
        "state_root": state_root,
        "version": MARKER_VERSION,
    }
    if any(facts.get(key) != value for key, value in expected.items()):
        return None
    if not facts.get("database") or facts.get("sweep") != "0":
        return None
    if facts.get("env_file") and facts["env_file"] != _file_stamp(facts["env_file"].split("\t")[0]):
        return None
    return facts


def _sha256(raw: bytes) -> str:
    """config.files.config_fingerprint, from the builtin module when there
    is one (hashlib loads OpenSSL first)."""
    try:
        from _sha2 import sha256  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found, no-redef, unused-ignore]
        except ImportError:
            from hashlib import sha256
    return str(sha256(raw).hexdigest())


# The marker is lines of `key<TAB>value`: json would import `re`, a tenth
# of this path. Bump the version when a key changes meaning.
MARKER_VERSION = "3"


def _read_marker(state_root: str) -> dict[str, str] | None:
    try:
        with open(os.path.join(state_root, MARKER), encoding="utf-8") as file:
            lines = file.read().splitlines()
    except (OSError, UnicodeError):
        return None
    facts: dict[str, str] = {}
    for line in lines:
        key, sep, value = line.partition("\t")
        if not sep:
            return None
        facts[key] = value
    return facts


def _file_stamp(path: str) -> str:
    """What tells an env file changed since the full tick read it."""
    try:
        info = os.lstat(path)
    except OSError:
        return ""
    return "\t".join(map(str, (path, info.st_ino, info.st_size, info.st_mtime_ns, info.st_mode)))


def remember(
    *,
    config: Path | None,
    fingerprint: str,
    database: str | None,
    lock_file: Path,
    state_root: Path,
    busy_timeout: float,
    hooks: bool,
    sweep: bool,
    env_file: Path | None,
    best: bool = True,
    db_given: str | None,
    database_url: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Note what a full tick read of its config, for the next idle tick.

    Written only when it changed; whichever way the tick was told its config
    (--config, ORCHESTRATOR_CONFIG, the working folder), the note is keyed
    by the config's absolute path, so the project folder's `tick -q` and
    cron's line share it. A database URL given outside the config (--db or
    ORCHESTRATOR_DB_URL) is noted as the tick resolved it (`database_url`):
    an idle tick given another is not vouched for. A failure to write it
    merely leaves the next idle ticks on the full path."""
    env = os.environ if environ is None else environ
    outside = db_given or env.get(DB_URL_ENV, "")
    if config is None or (outside and not database_url):
        return
    facts = {
        "version": MARKER_VERSION,
        "config": str(config),
        "fingerprint": fingerprint,
        "db": (database_url or "") if outside else "",
        "state_root": str(state_root),
        "database": database or "",
        "lock_file": str(lock_file),
        "busy_timeout": repr(float(busy_timeout)),
        "hooks": "1" if hooks else "0",
        "sweep": "1" if sweep else "0",
        "best": "1" if best else "0",
        # the path, then its stamp (tab-separated, as the file's lines are not)
        "env_file": "" if env_file is None else _file_stamp(str(env_file)),
    }
    if any("\n" in value for value in facts.values()):
        return  # a path with a newline: the full path it is
    text = "".join(f"{key}\t{value}\n" for key, value in facts.items())
    marker = state_root / MARKER
    try:
        if marker.read_text(encoding="utf-8") == text:
            return
    except (OSError, UnicodeError):
        pass
    try:
        state_root.mkdir(parents=True, exist_ok=True)
        tmp = marker.with_name(f"{MARKER}.{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(marker)
    except OSError:
        return
