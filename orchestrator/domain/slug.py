"""The slug rule, shared by task slugs and stage names.

A slug names a folder under the workspace root, so the rule is strict ASCII:
no separators, no `..`, no leading dash (it could read as an option in argv),
and at most 63 characters (a path component well under NAME_MAX).
"""

from __future__ import annotations

import re

from orchestrator.errors import InvalidSlugError

SLUG_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")


def slug_problem(slug: str) -> str | None:
    """Say why `slug` is not a valid slug, or None when it is."""
    if not isinstance(slug, str):
        return "a slug must be a string"
    if not SLUG_PATTERN.fullmatch(slug):
        return (
            f"invalid slug {slug[:80]!r}: use 1-63 characters from a-z 0-9 . _ -, "
            "starting with a letter or digit"
        )
    if ".." in slug:
        return f"invalid slug {slug!r}: '..' is not allowed"
    return None


def validate_slug(slug: str) -> str:
    """Return `slug` unchanged, or raise InvalidSlugError saying why not."""
    problem = slug_problem(slug)
    if problem is not None:
        raise InvalidSlugError(problem)
    return slug
