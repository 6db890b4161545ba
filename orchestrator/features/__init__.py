"""The features: each a package here, reaching the engine only through
`orchestrator.ext` (its `FEATURE`). `FEATURES` is the registration list,
read only by `orchestrator.compose`; its order is the order of each hook
point's calls."""

from __future__ import annotations

from orchestrator.ext.hooks import Feature
from orchestrator.features import landing, pools, restore, sandbox

# Landing before restore: what a tick's attempts finished lands before a
# halted `best` stage gets its best attempt back, as the tick always did.
# Pools shares no point with either (the claim's refusal, the attempt's
# usage limit, the record's pause); the sandbox none with any (it alone
# wraps commands).
FEATURES: tuple[Feature, ...] = (landing.FEATURE, restore.FEATURE, pools.FEATURE, sandbox.FEATURE)
