"""What holds claiming back: an edited config file stops it, and a task whose
attempt just ended waits out `retry_interval` before it is claimed again."""

from __future__ import annotations

import time
from pathlib import Path

from orchestrator.config import config_fingerprint


class ConfigWatch:
    """Whether the config file was edited since the settings were read.

    Asked before every claim: a stat each time, the file read and hashed
    only when its stat moved (a `touch` is not an edit)."""

    def __init__(self, path: Path | None, fingerprint: str) -> None:
        self.path = path
        self.fingerprint = fingerprint
        self._seen: tuple[int, ...] | None = None

    def changed(self) -> bool:
        if self.path is None:
            return False
        try:
            st = self.path.stat()
        except OSError:
            seen = None
        else:
            seen = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
        if seen is not None and seen == self._seen:
            return False
        # A write within the timestamp's granularity of the last one can
        # keep its stat: trust a stat only once its mtime is a second old.
        fresh = seen is not None and time.time_ns() - seen[0] < 1_000_000_000
        self._seen = None if fresh else seen
        return config_fingerprint(self.path) != self.fingerprint


class Cooldown:
    """The retry wait: tasks whose last attempt ended less than `seconds` ago
    are passed over by the claim, so a failing task does not spin."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._ended: dict[int, float] = {}  # task id -> when its last attempt ended

    def ended(self, task_id: int) -> None:
        self._ended[task_id] = time.monotonic()

    def waiting(self) -> set[int]:
        """The tasks still waiting (forgetting those that waited enough)."""
        now = time.monotonic()
        self._ended = {
            task_id: ended for task_id, ended in self._ended.items() if now - ended < self.seconds
        }
        return set(self._ended)
