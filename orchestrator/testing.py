"""Fault injection for the reliability tests (RELIABILITY.md A2, A3).

Product code calls `fault_point("after_claim_commit")`; it does nothing unless
`ORCHESTRATOR_TEST_FAULT` names that point. The action after the colon is
`exit` (default: `os._exit(137)`, no finalisers, like SIGKILL), `raise`
(an exception) or `stop` (SIGSTOP to ourselves). Read once at import: a tick
is one process, and the check must cost nothing on the hot path.

`ORCHESTRATOR_TEST_CRASH_AFTER_STMT=n` makes the process `os._exit(137)`
right after its n-th SQL statement (the SQLite "fault after N operations"
loop, applied to our statements); `install_statement_crash` hooks it onto
an engine.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

_SPEC = os.environ.get("ORCHESTRATOR_TEST_FAULT", "")
_CRASH_AFTER = int(os.environ.get("ORCHESTRATOR_TEST_CRASH_AFTER_STMT", "0") or 0)
_POINT, _, _ACTION = _SPEC.partition(":")


class InjectedFault(RuntimeError):
    """Raised at a crash point whose action is `raise`."""


def fault_point(name: str) -> None:
    if not _POINT or name != _POINT:
        return
    if _ACTION == "raise":
        raise InjectedFault(f"injected fault at {name}")
    if _ACTION == "stop":
        # Aimed at this thread, so it stops here and not a few statements on.
        signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
        return
    os._exit(137)


def install_statement_crash(engine: Any) -> None:
    """Exit after the n-th statement executed on `engine`, when asked to."""
    if _CRASH_AFTER <= 0:
        return
    from sqlalchemy import event

    count = 0

    @event.listens_for(engine, "after_cursor_execute")
    def _count(*_args: Any) -> None:
        nonlocal count
        count += 1
        if count >= _CRASH_AFTER:
            os._exit(137)
