"""The tick's side of a gate that earns autonomy: `open_gate`, inside the
record's transaction, after the passing verdict was written as waiting."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection

from orchestrator.ext.hooks import TickHooks
from orchestrator.ext.model import Claim
from orchestrator.ext.ports import Kernel
from orchestrator.features.evidence.autogate import gate_mode
from orchestrator.features.evidence.autogate_config import AUTOGATE_SECTION
from orchestrator.features.evidence.identity import verifier_identity
from orchestrator.features.evidence.store import GATE_AUDIT, lock_gate
from orchestrator.storage.repo import outbox


def tick_hooks(kernel: Kernel) -> TickHooks:
    settings = kernel.settings
    if not any(s.gate == "auto" for p in settings.pipelines.values() for s in p.stages):
        return TickHooks()

    def open_gate(conn: Connection, claim: Claim, now: datetime) -> str | None:
        stage = claim.stage
        if stage.gate != "auto":
            return None
        pipeline = claim.pipeline.name
        lock_gate(conn, pipeline, stage.name)
        mode = gate_mode(conn, pipeline, stage.name, AUTOGATE_SECTION.of(stage))
        identity = verifier_identity(stage, settings.base_dir)
        verifier = "the worker's verdict" if identity is None else f"verifier {identity.id}"
        if mode.mode == "audit":
            outbox.record(
                conn,
                GATE_AUDIT,
                claim.task,
                now=now,
                attempt_id=claim.attempt_id,
                stage=stage.name,
                facts={"verifier": verifier, "reason": mode.why()},
            )
            kernel.tx.say_after_commit(f"{claim.task.slug}: {stage.name} audited: {mode.why()}")
            return None
        if mode.mode == "auto":
            return f"{verifier}: {mode.why()}"
        return None

    return TickHooks(open_gate=open_gate)
