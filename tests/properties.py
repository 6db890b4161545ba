"""How many examples a Hypothesis property draws on an ordinary run.

The domain's properties were tuned for a hunt (1,000-2,000 examples each);
on every run of the suite that cost a worker about two minutes on a loaded
machine, for properties whose known counterexamples are kept as the explicit
cases beside them. An ordinary run draws a fifth (never fewer than
Hypothesis' own default of 100); `ORCHESTRATOR_DEEP_PROPERTIES=1` draws the
full number, for a hunt after a change to the parser or the rule.
"""

from __future__ import annotations

import os

DEEP_ENV = "ORCHESTRATOR_DEEP_PROPERTIES"


def examples(deep: int) -> int:
    """The examples to draw for a property whose hunt needs `deep`."""
    if os.environ.get(DEEP_ENV, "") not in ("", "0"):
        return deep
    return max(100, deep // 5)
