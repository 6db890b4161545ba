"""The tick, job by job; `Ticker` puts the jobs together and runs them."""

from orchestrator.tick.attempt_context import AttemptContext
from orchestrator.tick.model import Claim, TickOptions, TickReport
from orchestrator.tick.ticker import Ticker

__all__ = ["AttemptContext", "Claim", "TickOptions", "TickReport", "Ticker"]
