"""Who acted, as a transition records it: a name a person can read back.

`--by` comes from argv (a byte that is not UTF-8 arrives as a lone
surrogate), a web name from a Basic header (anything, NUL included); the
`actor` column is text of at most 255 characters on PostgreSQL, which
refuses NUL. A name is checked once, where it comes in.
"""

from __future__ import annotations

import unicodedata

MAX_ACTOR = 200  # characters; well inside the column's 255


def actor_problem(name: str) -> str | None:
    """Why `name` cannot be recorded as an actor, or None when it can."""
    if not name.strip():
        return "is empty"
    if len(name) > MAX_ACTOR:
        return f"is longer than {MAX_ACTOR} characters"
    for char in name:
        if "\ud800" <= char <= "\udfff":
            return "is not UTF-8 text"
        if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
            return f"holds the control character U+{ord(char):04X}"
    return None
