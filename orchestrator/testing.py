"""Fault injection for the reliability tests (RELIABILITY.md A2, A3).

Product code calls `fault_point("after_claim_commit")`; it does nothing unless
`ORCHESTRATOR_TEST_FAULT` names that point. The action after the colon is
`exit` (default: `os._exit(137)`, no finalisers, like SIGKILL), `raise`
(an exception), `term` (SIGTERM to ourselves) or `stop` (SIGSTOP to
ourselves). Read once at import: a tick is one process, and the check must
cost nothing on the hot path.

`ORCHESTRATOR_TEST_CRASH_AFTER_STMT=n` makes the process `os._exit(137)`
right after its n-th SQL statement (the SQLite "fault after N operations"
loop, applied to our statements); `install_statement_crash` hooks it onto
an engine, and `Prepared` statements count themselves.
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
    if _ACTION == "term":
        # As if SIGTERM arrived right here: the handler sets the stop event.
        os.kill(os.getpid(), signal.SIGTERM)
        return
    if _ACTION == "stop":
        # Aimed at this thread, so it stops here and not a few statements on.
        signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
        return
    os._exit(137)


_executed = 0


def statement_executed(_sql: str = "") -> None:
    """Count one SQL statement; exit when it is the n-th one asked for.

    Called by `Prepared` (which runs on the driver cursor, out of the
    engine's sight) and by the hook `install_statement_crash` puts on an
    engine, so the sweep covers every statement, hot path or not. The
    sweep's counter replaces this function to see the same statements."""
    global _executed  # noqa: PLW0603 - one process, one count, by design
    if _CRASH_AFTER <= 0:
        return
    _executed += 1
    if _executed >= _CRASH_AFTER:
        os._exit(137)


def install_statement_crash(engine: Any) -> None:
    """Exit after the n-th statement executed on `engine`, when asked to."""
    if _CRASH_AFTER <= 0:
        return
    from sqlalchemy import event

    event.listen(engine, "after_cursor_execute", lambda *_args: statement_executed())
