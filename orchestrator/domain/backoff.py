"""The wait after a retry exit code: a stage's `backoff`, as a value.

Pure, like the plateau rule: the guards decide with it, the config builds
it, and neither has to import the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass

# The longest wait (a year, in seconds): beyond it a wait means "never"
# (which `halt` says better), and past ~1e13 s the time it ends cannot be
# represented, so the attempt could not be recorded at all.
MAX_BACKOFF = 365 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long a worker that exited with a retry exit code waits, and how often.

    The wait before try n (1-based) is `initial * factor**(n-1)`, at most
    `max` seconds (and never more than a year, whatever built it); after
    `tries` waits in a row the next such exit is an ordinary `worker_error`,
    which spends an attempt.
    """

    initial: float = 60.0
    factor: float = 2.0
    max: float = 3600.0
    tries: int = 5

    def delay(self, waits_before: int) -> float:
        """The wait after `waits_before` earlier waits in a row."""
        try:
            wait = float(min(self.max, self.initial * self.factor**waits_before))
        except OverflowError:
            wait = self.max
        return min(wait, MAX_BACKOFF)
