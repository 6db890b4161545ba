"""`orchestrator doctor`: check a setup before cron finds out the hard way.

Each check returns ok, warn or fail with one line of detail. A failure is
something that stops ticks or tasks (a database not at head, a worker binary
that is not installed, a missing prompt); a warning is something that works
today but is fragile (a lock file in /tmp, expired leases the next tick will
recover). The CLI exits 0 when nothing failed, 1 when a check failed, and 78
when the configuration itself cannot be loaded: nothing else can be checked
then.

Doctor never creates a database and never changes one; it takes the tick
lock for an instant only to learn whether a tick holds it.
"""

from __future__ import annotations

from orchestrator.doctor.commands import PYTEST_JUDGE as PYTEST_JUDGE
from orchestrator.doctor.commands import _judge_checks as _judge_checks
from orchestrator.doctor.commands import command_check
from orchestrator.doctor.database import _parked_checks as _parked_checks
from orchestrator.doctor.folders import TEMP_FOLDERS as TEMP_FOLDERS
from orchestrator.doctor.folders import _in_temp_folder as _in_temp_folder
from orchestrator.doctor.folders import _lock_checks as _lock_checks
from orchestrator.doctor.report import Check, DoctorReport, Level
from orchestrator.doctor.run import run_doctor

__all__ = [
    "Check",
    "DoctorReport",
    "Level",
    "command_check",
    "run_doctor",
]
