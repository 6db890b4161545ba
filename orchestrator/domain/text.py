"""Make a child process's text safe to store and to pass on.

Workers and verifiers print whatever they like, and Python decodes it with
`surrogateescape` or gets it from `json.loads`, which happily yields lone
surrogates from `"\\ud800"`. Such a string is a valid `str` but cannot be
encoded as UTF-8, so it breaks the SQLite/PostgreSQL INSERT, `os.execve` and
`os.environ` far away from where it came in. NUL is refused by PostgreSQL text
columns, by argv and by the environment. One function, applied at each border,
keeps those failures out of the rest of the code.
"""

from __future__ import annotations

import re

_NUL = "\x00"
_SURROGATE = re.compile(r"[\ud800-\udfff]")
REPLACEMENT_CHARACTER = "\ufffd"


def clean_text(s: str, limit: int | None = None) -> str:
    """Return `s` without NUL, with every surrogate code point replaced by U+FFFD.

    A Python `str` holds code points, so any surrogate in it is unpaired as far
    as UTF-8 is concerned (even two that would form a pair in UTF-16): each
    becomes one U+FFFD. With `limit`, the result is cut to at most `limit`
    bytes of UTF-8, never inside a character. A negative `limit` is a
    ValueError.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, not {limit}")
    if _NUL in s:
        s = s.replace(_NUL, "")
    try:
        encoded = s.encode("utf-8")
    except UnicodeEncodeError:
        s = _SURROGATE.sub(REPLACEMENT_CHARACTER, s)
        encoded = s.encode("utf-8")
    if limit is None or len(encoded) <= limit:
        return s
    # Cutting valid UTF-8 can only break the last character; "ignore" drops
    # exactly that partial sequence and nothing else.
    return encoded[:limit].decode("utf-8", "ignore")


def one_line(s: str, limit: int = 200) -> str:
    """`s` as one short line for a log: whitespace runs become one space,
    control and format characters (escapes, bidi overrides) a `?`, and past
    `limit` characters it is cut with `…`."""
    import unicodedata

    flat = " ".join(s.split())
    shown = "".join("?" if unicodedata.category(c) in ("Cc", "Cf") else c for c in flat)
    return shown if len(shown) <= limit else shown[: limit - 1].rstrip() + "…"
