"""Named crash points for the fault-injection tests (RELIABILITY.md A2).

Product code calls `fault_point("after_claim_commit")`; it does nothing unless
`ORCHESTRATOR_TEST_FAULT` names that point. The action after the colon is
`exit` (default: `os._exit(137)`, no finalisers, like SIGKILL), `raise`
(an exception) or `stop` (SIGSTOP to ourselves). Read once at import: a tick
is one process, and the check must cost nothing on the hot path.
"""

from __future__ import annotations

import os
import signal

_SPEC = os.environ.get("ORCHESTRATOR_TEST_FAULT", "")
_POINT, _, _ACTION = _SPEC.partition(":")


class InjectedFault(RuntimeError):
    """Raised at a crash point whose action is `raise`."""


def fault_point(name: str) -> None:
    if not _POINT or name != _POINT:
        return
    if _ACTION == "raise":
        raise InjectedFault(f"injected fault at {name}")
    if _ACTION == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
        return
    os._exit(137)
