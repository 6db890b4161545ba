"""Whether anything of an attempt ran: a marker in its state folder.

Recovery charges an orphaned attempt (`crashed`, which counts toward
`max_attempts`) only when one of its commands was seen running: noted past
`PROCESS_NOTE_AFTER`, or ended (or it reported what it spent, which only a
command that ran can do). A tick killed between its claim's commit and
the first command leaves no marker, and its attempt is closed `host_error`,
which counts toward nothing: no code of the task ran, so its death is not
the task's fault.

A file, not a column: writing a row per attempt would cost a commit on the
hot path, and only this host can read the folder; an attempt of another host
keeps being judged `crashed` (see the README's recovery section).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from orchestrator import safefs

STARTED = "started"


def mark_started(folder: Path) -> None:
    """Best effort: a disk that cannot take the marker leaves the attempt
    uncharged should its tick die, the error a full disk makes anyway."""
    with contextlib.suppress(OSError):
        safefs.replace(folder / STARTED, b"")  # not through a link the worker planted


def has_started(folder: Path) -> bool:
    return (folder / STARTED).exists()
