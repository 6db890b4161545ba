"""Running one hook once: the event on stdin, a hard timeout, the error kept short.

The hook runs in its own session, so a timeout kills everything it started
(a `curl` under `sh -c` included) and nothing it leaves behind holds the tick.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from orchestrator.events.hooks import HookConfig

ERROR_TAIL = 500  # characters of the hook's stderr kept as `last_error`


def run_hook(hook: HookConfig, payload: bytes, cwd: Path, env: Mapping[str, str]) -> str | None:
    """None when the hook exited 0, else why it failed (stored as the try's error)."""
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                hook.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd=cwd if cwd.is_dir() else None,
                env=dict(env),
                start_new_session=True,
            )
        except OSError as exc:
            return f"could not start {hook.command[0]!r}: {exc.strerror or exc}"
        try:
            proc.communicate(payload, timeout=hook.timeout_seconds)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return f"timed out after {hook.timeout_seconds:g} s (killed)"
        if proc.returncode == 0:
            return None
        err.seek(0)
        tail = err.read().decode(errors="replace").strip()[-ERROR_TAIL:]
        status = (
            f"killed by signal {-proc.returncode}"
            if proc.returncode < 0
            else f"exit {proc.returncode}"
        )
        return f"{status}: {tail}" if tail else status
