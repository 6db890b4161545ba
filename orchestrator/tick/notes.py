"""What the tick notes about its running attempts, per attempt folder: the
last process each started (for its record) and the files the disk could
not take (named in its error). Commands write these notes; the attempt and
its record take them."""

from __future__ import annotations

import threading
from pathlib import Path

from orchestrator import runner


class AttemptNotes:
    """Notes kept in memory, keyed by attempt folder, shared by the pool's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._processes: dict[Path, runner.ProcessIdentity] = {}
        # Per attempt folder: a capture file the disk could not take.
        self._capture_notes: dict[Path, str] = {}

    def note_process(self, folder: Path, ident: runner.ProcessIdentity) -> None:
        with self._lock:
            self._processes[folder] = ident

    def take_process(self, folder: Path) -> runner.ProcessIdentity | None:
        """The last process the attempt started, forgotten once taken."""
        with self._lock:
            return self._processes.pop(folder, None)

    def note_capture(self, state_dir: Path, note: str) -> None:
        """Note a file of the attempt the disk could not take (notes of one
        attempt accumulate; the record names them all)."""
        with self._lock:
            earlier = self._capture_notes.get(state_dir)
            self._capture_notes[state_dir] = note if earlier is None else f"{earlier}; {note}"

    def take_capture(self, folder: Path) -> str | None:
        with self._lock:
            return self._capture_notes.pop(folder, None)
