"""What holds claiming back: an edited config file stops it. (The retry
wait, `Cooldown`, is shared vocabulary: `ext/model.py`.)"""

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
