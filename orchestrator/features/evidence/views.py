"""What `explain` says of a task at a `gate = "auto"` stage: which mode
the gate is in now, and why (the evidence against the rule)."""

from __future__ import annotations

from sqlalchemy import Connection

from orchestrator.config import Settings
from orchestrator.ext.views import Explained
from orchestrator.features.evidence.autogate import gate_mode
from orchestrator.features.evidence.autogate_config import AUTOGATE_SECTION
from orchestrator.storage import repo


def explain(conn: Connection, settings: Settings, task: repo.TaskSnapshot) -> Explained | None:
    pipeline = settings.pipeline(task.pipeline)
    stage = None if pipeline is None else pipeline.stage(task.stage)
    if stage is None or stage.gate != "auto":
        return None
    policy = AUTOGATE_SECTION.of(stage)
    mode = gate_mode(conn, task.pipeline, task.stage, policy)
    data = {
        "stage": task.stage,
        "mode": mode.mode,
        "decisions": mode.decisions,
        "approved": mode.approved,
        "precision": mode.precision,
        "bound": round(mode.bound, 6),
        "since_reject": mode.since_reject,
        "streak": mode.streak,
        "auto_after": policy.auto_after,
        "auto_precision": policy.auto_precision,
        "audit_every": policy.audit_every,
    }
    return Explained("autogate", data, (f"gate {task.stage} (auto): next verdict {mode.why()}",))
