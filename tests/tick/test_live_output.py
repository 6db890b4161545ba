"""`<command>.live`, the web tail's spool: whatever a worker plants in its
place (it shares the attempt's state folder, writable inside the sandbox
too) must never stop the tick that writes it."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from orchestrator.tick.live_output import live_spool


def test_a_fifo_planted_as_the_live_file_does_not_block_the_spool(tmp_path: Path) -> None:
    path = tmp_path / "worker.live"
    os.mkfifo(path)
    spool = live_spool(path)
    done = threading.Event()

    def write() -> None:
        spool(b"a line\n")
        done.set()

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    try:
        assert done.wait(timeout=10), "the spool blocked opening a FIFO with no reader"
    finally:
        if not done.is_set():  # unblock the open so the thread can end
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            thread.join(timeout=10)
            os.close(fd)


def test_a_regular_live_file_still_gets_every_chunk(tmp_path: Path) -> None:
    path = tmp_path / "worker.live"
    spool = live_spool(path)
    spool(b"one\n")
    spool(b"two\n")
    assert path.read_bytes() == b"one\ntwo\n"
