"""Checks of the lock file and the folders a tick writes to.

A lock or a folder under a temporary folder works today and is gone after a
reboot, so it is a warning, not a failure.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from orchestrator.config import Settings
from orchestrator.doctor.report import Check, Level
from orchestrator.errors import LockBusyError, OrchestratorError

TEMP_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm")  # noqa: S108 - we warn about them


def _in_temp_folder(path: Path) -> bool:
    real = Path(os.path.realpath(path))
    temps = {Path(os.path.realpath(p)) for p in (*TEMP_FOLDERS, tempfile.gettempdir())}
    return any(real.is_relative_to(temp) for temp in temps)


def _lock_checks(settings: Settings) -> list[Check]:
    from orchestrator.locking import TickLock

    path = settings.lock_file
    checks: list[Check] = []
    lock = TickLock(path)
    try:
        lock.acquire()
    except LockBusyError:
        checks.append(Check(Level.OK, "lock", f"{path} held by {lock.holder()} (a tick runs)"))
    except OrchestratorError as exc:
        checks.append(Check(Level.FAIL, "lock", str(exc)))
    else:
        lock.release()
        checks.append(Check(Level.OK, "lock", f"{path} free"))
    if _in_temp_folder(path):
        # "Beside the config" is no advice when the config is in /tmp too.
        where = (
            "move the project out of the temporary folder, or set lock_file to a path "
            "outside it (e.g. under ~/.cache)"
            if _in_temp_folder(settings.base_dir)
            else "set lock_file beside the config"
        )
        checks.append(
            Check(
                Level.WARN,
                "lock",
                f"{path} is in a temporary folder: a cleaner may delete it while a tick "
                f"holds it, and services with a private /tmp see another file; {where}",
            )
        )
    return checks


def _writable_or_creatable(path: Path) -> bool:
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            return False
        probe = probe.parent
    return probe.is_dir() and os.access(probe, os.W_OK | os.X_OK)


def _folder_checks(settings: Settings) -> list[Check]:
    checks = []
    for key, path in (
        ("workspace_root", settings.workspace_root),
        ("state_root", settings.state_root),
    ):
        if _writable_or_creatable(path):
            checks.append(Check(Level.OK, "folders", f"{key} {path} is writable"))
        else:
            checks.append(Check(Level.FAIL, "folders", f"{key} {path} cannot be written"))
    return checks
