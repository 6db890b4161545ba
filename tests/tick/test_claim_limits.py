"""What holds claiming back, as plain unit tests: an edited config file (a
`touch` is no edit) and the retry wait of a task whose attempt just ended."""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.config import config_fingerprint
from orchestrator.ext.model import Cooldown
from orchestrator.tick.claim_limits import ConfigWatch


def test_an_edit_changes_the_config_and_a_touch_does_not(tmp_path: Path) -> None:
    path = tmp_path / "orchestrator.toml"
    path.write_text("[orchestrator]\n")
    watch = ConfigWatch(path, config_fingerprint(path))
    assert not watch.changed()
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns + 5_000_000_000, stat.st_mtime_ns + 5_000_000_000))
    assert not watch.changed()
    path.write_text("[orchestrator]\nlease_seconds = 30\n")
    assert watch.changed()
    assert not ConfigWatch(None, "").changed()  # no file: nothing to edit


def test_a_task_waits_out_the_retry_interval() -> None:
    waiting = Cooldown(3600)
    waiting.ended(7)
    assert waiting.waiting() == {7}
    over = Cooldown(0)
    over.ended(7)
    assert over.waiting() == set()
