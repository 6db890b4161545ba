"""What the courier could not deliver, for the tick's exit status: a tick
that printed a delivery error must not exit 0 (cron would call it a success
and nobody would look), so it exits `DELIVERY_STATUS` unless another error
already set its status. The event stays pending; a later tick retries it."""

from __future__ import annotations

import threading
from collections.abc import Callable

from orchestrator.ext.model import TickError, TickReport

# EX_TEMPFAIL: try again later; the undelivered events are retried by later ticks.
DELIVERY_STATUS = 75


class DeliveryFailures:
    """Passes the courier's error lines on, remembering that there were some."""

    def __init__(self, warn: Callable[[str], None]) -> None:
        self._warn = warn
        self._lock = threading.Lock()
        self.count = 0

    def warn(self, line: str) -> None:
        with self._lock:
            self.count += 1
        self._warn(line)

    def settle(self, report: TickReport) -> None:
        """Note the failures in the report, once, for its exit status (each
        line is on stderr already)."""
        with self._lock:
            count, self.count = self.count, 0
        if count:
            message = f"{count} event deliveries failed; later ticks retry them"
            report.errors.append(TickError(message, DELIVERY_STATUS))
