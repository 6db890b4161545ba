"""Evidence from a project's own history: how far each gate's verifier
agrees with the people who decided its verdicts (`verifiers`), and what
another plateau rule would have done with the recorded runs (`simulate`).

It adds no tick hook and no table: everything is read from the attempts
and transitions the engine already writes, so a project that never asks
pays nothing."""

from __future__ import annotations

from types import MappingProxyType

from orchestrator.ext.hooks import Feature

FEATURE = Feature(
    name="evidence",
    commands=MappingProxyType(
        {
            "verifiers": "orchestrator.features.evidence.cli:verifiers",
            "simulate": "orchestrator.features.evidence.cli:simulate",
        }
    ),
)
