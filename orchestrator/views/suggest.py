"""Typos in task slugs, stages and states are errors that name the likely
intent ("did you mean"), never an empty table or a silent exit 0."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from sqlalchemy import Connection

from orchestrator.errors import UnknownTaskError
from orchestrator.storage import repo
from orchestrator.storage.reads.tasks import all_slugs


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)`, or "" when nothing is close."""
    close = difflib.get_close_matches(name, sorted(set(choices)), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_task(conn: Connection, slug: str) -> UnknownTaskError:
    """The error for a slug no task has, with the closest slug there is.

    Only on the error path: reading every slug is a scan of `tasks`."""
    slugs = all_slugs(conn)
    return UnknownTaskError(f"no task {slug!r}{did_you_mean(slug, slugs)}")


def require_task(conn: Connection, slug: str) -> repo.TaskSnapshot:
    task = repo.get_task(conn, slug)
    if task is None:
        raise unknown_task(conn, slug)
    return task


__all__ = ["did_you_mean", "require_task", "unknown_task"]
