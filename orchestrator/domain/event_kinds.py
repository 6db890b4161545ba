"""Which transitions are news. Adding a kind is one line here."""

from __future__ import annotations

from orchestrator.domain.pipeline import Status

# A transition into one of these statuses writes an event of that kind.
BY_STATUS: dict[Status, str] = {
    Status.AWAITING_APPROVAL: "awaiting_approval",
    Status.HALTED: "halted",
    Status.COMPLETE: "complete",
}
# An attempt that recovery closes as crashed (its tick died under it).
CRASHED = "crashed"
# A landing moved the change to its target (`features/landing/landing.py`): the commit,
# the pull request, for the hooks.
LANDED = "landed"

# A usage limit paused a pool / the pause ended (`features.pools`); the task is
# the one whose attempt met the limit.
POOL_PAUSED = "pool_paused"
POOL_RESUMED = "pool_resumed"

# A person moved the task to another pipeline version (`features/versions`).
MIGRATED = "migrated"

KINDS: tuple[str, ...] = (
    *BY_STATUS.values(),
    CRASHED,
    LANDED,
    POOL_PAUSED,
    POOL_RESUMED,
    MIGRATED,
)
