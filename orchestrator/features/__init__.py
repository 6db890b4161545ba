"""The features: each a package here, reaching the engine only through
`orchestrator.ext` (its `FEATURE`). `FEATURES` is the registration list,
read only by `orchestrator.compose`; its order is the order of each hook
point's calls."""

from __future__ import annotations

from orchestrator.ext.hooks import Feature
from orchestrator.features import (
    candidates,
    evidence,
    landing,
    memory,
    notes,
    pools,
    restore,
    sandbox,
    telemetry,
)

# Landing before restore: what a tick's attempts finished lands before a
# halted `best` stage gets its best attempt back, as the tick always did.
# Pools shares no point with either (the claim's refusal, the attempt's
# usage limit, the record's pause). Memory before pools: its refusal reads
# only, so a claim it refuses has not locked (or resumed) a pool first.
# Candidates asks the pools' refusal through the claim
# (`ClaimSearch.refused`), not by order. The sandbox shares no point with
# any (it alone wraps commands). Telemetry first: its `before_claims` notes
# where the tick's landings begin before any lands; it changes nothing.
FEATURES: tuple[Feature, ...] = (
    telemetry.FEATURE,
    landing.FEATURE,
    restore.FEATURE,
    memory.FEATURE,
    pools.FEATURE,
    candidates.FEATURE,
    sandbox.FEATURE,
    notes.FEATURE,
    evidence.FEATURE,
)
