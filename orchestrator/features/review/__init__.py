"""The review loop: a pull request `land = "pr"` opened is followed to its
end. The task waits `held` (the landing's `hold_finished` point); each tick
reads the pull request with a conditional request, at most every
`poll_seconds`: merged completes it, closed halts it, a person's review
or comments and failing checks send it back with them as the hint, and
the next push's commit is named in a reply to each comment."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.ext.hooks import Feature, TickHooks
from orchestrator.features.review.config import REVIEW_SECTION

if TYPE_CHECKING:
    from orchestrator.ext.ports import Kernel


def _tick(kernel: Kernel) -> TickHooks:
    # Imported when a Ticker is built, and only for a config that follows a
    # pull request: a tick without one loads none of it.
    if not any(REVIEW_SECTION.of(p).follow for p in kernel.settings.pipelines.values()):
        return TickHooks()
    from orchestrator.features.review.follow import tick_hooks

    return tick_hooks(kernel)


FEATURE = Feature(
    name="review",
    config=(REVIEW_SECTION,),
    tick=_tick,
    explain="orchestrator.features.review.views:explain",
)
