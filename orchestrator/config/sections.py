"""The one list of the features' config Sections, in reading order.

The loader and the reference's generator take this list rather than
importing each feature, so a composition root can hand them another one.
The engine's and the older features' Sections are named here; a feature
package declares its own in its `Feature.config`, appended in `FEATURES`
order, so adding one edits nothing here.
The order is the order of the keys in each table's unknown-key error, and
of the top-level tables after the engine's.
"""

from __future__ import annotations

from typing import Any

from orchestrator.agents.config import AGENT_SECTION, RESUME_SECTION
from orchestrator.config.core import CANDIDATES_SECTION
from orchestrator.config.schema import Section
from orchestrator.config.selection import SELECTION_SECTION
from orchestrator.events.hooks import HOOKS_SECTION
from orchestrator.features import FEATURES
from orchestrator.features.landing.config import LAND_SECTION
from orchestrator.features.pools.config import POOLS_SECTION
from orchestrator.features.sandbox.config import SANDBOX_SECTION
from orchestrator.guards.config import GUARD_SECTION

FEATURE_SECTIONS: tuple[Section[Any], ...] = (
    HOOKS_SECTION,
    POOLS_SECTION,
    CANDIDATES_SECTION,
    AGENT_SECTION,
    GUARD_SECTION,
    LAND_SECTION,
    SANDBOX_SECTION,
    RESUME_SECTION,
    SELECTION_SECTION,
    *(section for feature in FEATURES for section in feature.config),
)
