"""`[orchestrator] env_file`: where a cron tick finds the stages' secrets.

Cron starts a tick with an almost empty environment, so an API key exported
in a login shell never reaches it. The file holds dotenv lines (`NAME=value`,
`# comments`, blank lines, an optional `export `, a value optionally in
single or double quotes); its variables are a source for the stages'
`secrets` only, never inherited by any command as a whole.

Refused (exit 78) unless it is a regular file, not a link, that only its
owner may read or write (mode 0600 or 0400): a key that the group can read is
no secret. An error names the file and the line, never the value on it.
Standard library only, like the rest of the configuration.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from orchestrator.errors import ConfigError

MAX_BYTES = 1_048_576  # a file of secrets is small; a larger one is a mistake
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "$": "$"}


def read_env_file(path: Path) -> dict[str, str]:
    """The variables `path` sets; ConfigError (78) with one line naming
    the file (and the line) when it cannot be trusted or read."""
    return parse_env_text(path, _read_private(path))


def _read_private(path: Path) -> str:
    # O_NOFOLLOW: a link is refused wherever it points; O_NONBLOCK: opening
    # a FIFO someone put there cannot hang the tick.
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ConfigError(f"env_file {path}: not found") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link
            raise ConfigError(f"env_file {path}: is a link; name the file itself") from None
        raise ConfigError(f"env_file {path}: cannot open: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"env_file {path}: not a regular file")
        if info.st_mode & 0o077:
            raise ConfigError(
                f"env_file {path}: group or others may access it (mode "
                f"{stat.S_IMODE(info.st_mode):04o}); run `chmod 600 {path}`"
            )
        data = os.read(fd, MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"env_file {path}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise ConfigError(f"env_file {path}: larger than {MAX_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"env_file {path}: not UTF-8 text") from None


def parse_env_text(path: Path, text: str) -> dict[str, str]:
    """Dotenv lines; a `#` starts a comment only at the start of a line, so
    a secret holding ` #` is never cut short. The last of two lines setting
    a name wins, as a shell would have it."""
    found: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parsed = _line(line)
        if parsed is None:
            # Never the line itself: it may hold the secret.
            raise ConfigError(
                f"env_file {path}:{number}: not a NAME=value line "
                "(a name of letters, digits and _, an optional `export `, "
                "a value in matching quotes or none)"
            )
        name, value = parsed
        found[name] = value
    return found


def _line(line: str) -> tuple[str, str] | None:
    if line.startswith("export ") or line.startswith("export\t"):
        line = line[len("export") :].lstrip()
    name, equals, value = line.partition("=")
    name = name.rstrip()
    if not equals or not _NAME.fullmatch(name) or name.startswith("ORCHESTRATOR_"):
        return None
    value = value.strip()
    if value[:1] in ("'", '"'):
        value_or_none = _quoted(value)
        if value_or_none is None:
            return None
        value = value_or_none
    if "\x00" in value:
        return None
    return name, value


def _quoted(value: str) -> str | None:
    """'literal' as it is; "text" with \\n, \\t, \\\\, \\" and \\$ escapes."""
    quote = value[0]
    if len(value) < 2 or value[-1] != quote:
        return None
    inner = value[1:-1]
    if quote == "'":
        return None if "'" in inner else inner
    out: list[str] = []
    index = 0
    while index < len(inner):
        char = inner[index]
        if char == '"':
            return None  # an unescaped quote inside: not one value
        if char == "\\" and index + 1 < len(inner):
            nxt = inner[index + 1]
            out.append(_ESCAPES.get(nxt, "\\" + nxt))
            index += 2
            continue
        if char == "\\":
            return None  # a trailing backslash escapes the closing quote
        out.append(char)
        index += 1
    return "".join(out)
