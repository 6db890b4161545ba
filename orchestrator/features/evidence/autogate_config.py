"""The stage keys of a gate that earns autonomy (`gate = "auto"`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.config.schema import STAGE_KEY, Integer, Key, Number, Section


@dataclass(frozen=True)
class AutoGate:
    auto_after: int = 30
    auto_precision: float = 0.9
    audit_every: int = 10


def _build(values: Mapping[str, Any]) -> AutoGate:
    return AutoGate(values["auto_after"], values["auto_precision"], values["audit_every"])


AUTOGATE_SECTION: Section[AutoGate] = Section(
    name="autogate",
    keys=(
        Key(
            "auto_after",
            Integer(1),
            30,
            'with `gate = "auto"`: the human decisions at this stage the verifier needs '
            "before a passing verdict may open the gate by itself "
            "([gates that earn autonomy](../how-to/evidence.md#gates-that-earn-autonomy))",
            STAGE_KEY,
        ),
        Key(
            "auto_precision",
            Number(0.0, 1.0),
            0.9,
            'with `gate = "auto"`: the lower bound (one-sided 95 % Wilson) the precision of '
            "the verifier's pass against those decisions must reach",
            STAGE_KEY,
        ),
        Key(
            "audit_every",
            Integer(1),
            10,
            'with `gate = "auto"`: every this-many-th passing verdict after autonomy was '
            "earned still waits for a person (1: every one)",
            STAGE_KEY,
        ),
    ),
    build=_build,
    extension=True,
)
