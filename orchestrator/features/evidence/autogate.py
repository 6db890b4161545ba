"""Gates that earn autonomy: at a `gate = "auto"` stage a passing verdict
opens the gate by itself once the people who decided this stage's
verdicts agreed with its verifier often enough, every `audit_every`-th
verdict excepted.

Everything is read from what is already recorded: the people's decisions
are the `approve`/`reject` transitions out of `S:awaiting_approval` whose
actor is not `verifier`; the gate's own openings are the `approve`s by
`verifier`; an audit is a `gate_audit` event on the verdict's attempt,
written here. A person's reject of an audited verdict starts a new epoch:
only decisions after it count. Nothing here runs for a stage without
`gate = "auto"`."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection

from orchestrator.features.evidence.autogate_config import AutoGate
from orchestrator.features.evidence.stats import wilson_lower
from orchestrator.features.evidence.store import gate_counts


@dataclass(frozen=True)
class GateMode:
    """What the gate at (pipeline, stage) does with the next passing verdict."""

    mode: str  # "person", "auto" or "audit"
    decisions: int  # human decisions counted (since the epoch)
    approved: int
    bound: float  # one-sided 95 % Wilson lower bound of approved / decisions
    since_reject: bool  # the epoch began at a person's reject of an audit
    streak: int  # verdicts the gate judged itself (opened or audited) this epoch
    policy: AutoGate

    @property
    def precision(self) -> float | None:
        return self.approved / self.decisions if self.decisions else None

    def why(self) -> str:
        """One line: the evidence and the rule it was held against."""
        p = self.policy
        precision = "n/a" if self.precision is None else f"{self.precision:.3f}"
        epoch = " since a person rejected an audited verdict" if self.since_reject else ""
        evidence = (
            f"N={self.decisions} human decisions{epoch}, precision {precision}, "
            f"Wilson bound {self.bound:.3f}"
        )
        if self.mode == "person":
            return (
                f"waits for a person: {evidence} (needs N >= {p.auto_after} "
                f"and bound >= {p.auto_precision:g})"
            )
        if self.mode == "audit":
            return f"audit (every {p.audit_every}th verdict waits for a person): {evidence}"
        return f"opens by itself: {evidence} >= {p.auto_precision:g}"


def gate_mode(conn: Connection, pipeline: str, stage: str, policy: AutoGate) -> GateMode:
    """The mode the next passing verdict at (pipeline, stage) meets."""
    counts = gate_counts(conn, pipeline, stage)
    n, approved = counts.decisions, counts.approved
    bound = wilson_lower(approved, n)
    streak = counts.opened + counts.audited
    if n < policy.auto_after or bound < policy.auto_precision:
        mode = "person"
    elif (streak + 1) % policy.audit_every == 0:
        mode = "audit"
    else:
        mode = "auto"
    return GateMode(mode, n, approved, bound, counts.since_reject, streak, policy)
