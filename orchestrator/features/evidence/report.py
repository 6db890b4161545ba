"""`verifiers`' figures per pipeline and stage: the decisions counted by
the store, read through the pure statistics, with the verifier's identity
from the config. Building is separate from printing so the JSON and the
text say the same numbers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from orchestrator.config import Settings
from orchestrator.features.evidence import stats
from orchestrator.features.evidence.errors import UsageError
from orchestrator.features.evidence.identity import verifier_identity
from orchestrator.features.evidence.store import (
    LANDED,
    SENT_BACK,
    DecisionCount,
    decision_counts,
)
from orchestrator.storage.db import read_tx

if TYPE_CHECKING:
    from sqlalchemy import Engine


@dataclass(frozen=True)
class StageKey:
    pipeline: str
    stage: str


def stage_report(
    settings: Settings, key: StageKey, counts: Sequence[DecisionCount]
) -> dict[str, Any]:
    """One stage's figures, as `verifiers --json` prints them."""
    cells = [stats.Cell(c.score, c.passed, c.approved, c.count) for c in counts]
    agree = stats.agreement(cells)
    area = stats.auc(cells)
    threshold = stats.best_threshold(cells)
    pipeline = settings.pipelines.get(key.pipeline)
    stage = pipeline.stage(key.stage) if pipeline is not None else None
    identity = verifier_identity(stage, settings.base_dir) if stage is not None else None
    return {
        "pipeline": key.pipeline,
        "stage": key.stage,
        "verifier": None
        if identity is None
        else {"id": identity.id, "argv": list(identity.argv), "scripts": dict(identity.scripts)},
        "decisions": agree.n,
        "approved": agree.approved,
        "passed": agree.passed,
        "unscored": sum(c.count for c in counts if c.score is None),
        "agreement": agree.agreement,
        "precision": agree.precision,
        # Only a passing verdict reaches a gate, so with no failing verdict
        # decided, recall is 1 by construction: not a measurement.
        "recall": agree.recall if agree.passed < agree.n else None,
        "auc": None if area is None else {"value": area.value, "low": area.low, "high": area.high},
        "at_chance": None if area is None else area.at_chance,
        "best_threshold": stats.as_dict(threshold),
        "reliability": [
            {"low": low, "high": high, "decisions": n, "approval_rate": rate}
            for low, high, n, rate in stats.reliability(cells)
        ],
        "later": {kind: _later(counts, kind) for kind in (SENT_BACK, LANDED)},
    }


def _later(counts: Sequence[DecisionCount], kind: str) -> dict[str, int]:
    """Approved decisions followed by `kind`, and how many of them the
    verifier had passed."""
    return {
        "decisions": sum(c.count for c in counts if c.later == kind),
        "passed": sum(c.count for c in counts if c.later == kind and c.passed),
    }


def build(
    settings: Settings,
    counts: Sequence[DecisionCount],
    pipeline: str | None = None,
    stage: str | None = None,
) -> list[dict[str, Any]]:
    """One report per gated stage of the config (those `pipeline`/`stage`
    keep) and per stage with decisions, sorted: a gate nobody decided yet
    is shown with 0 decisions, not left out."""
    groups: dict[StageKey, list[DecisionCount]] = {}
    for name, config in settings.pipelines.items():
        if pipeline is not None and name != pipeline:
            continue
        for gated in config.stages:
            if gated.gate and stage in (None, gated.name):
                groups[StageKey(name, gated.name)] = []
    for count in counts:
        groups.setdefault(StageKey(count.pipeline, count.stage), []).append(count)
    return [stage_report(settings, key, groups[key]) for key in sorted(groups, key=_order)]


def _order(key: StageKey) -> tuple[str, str]:
    return (key.pipeline, key.stage)


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def text_lines(report: dict[str, Any]) -> list[str]:
    """The stage's figures as a person reads them."""
    verifier = report["verifier"]
    head = f"{report['pipeline']}/{report['stage']}"
    who = f"verifier {verifier['id']}" if verifier else "verifier not in the config now"
    lines = [f"{head}  ({who})"]
    if report["decisions"] == 0:
        lines.append("  no decisions yet: nobody approved or rejected a verdict here")
        return lines
    lines.append(
        f"  decisions {report['decisions']}  approved {report['approved']}  "
        f"passed {report['passed']}  unscored {report['unscored']} (left out of AUC)"
    )
    lines.append(
        f"  agreement {_num(report['agreement'])}  precision {_num(report['precision'])}  "
        f"recall {_num(report['recall'])}"
        + ("" if report["recall"] is not None else " (only passing verdicts reached people)")
    )
    area = report["auc"]
    if area is None:
        lines.append("  AUC -  (needs scored approvals and rejects)")
    else:
        interval = (
            "no interval (needs two of each)"
            if area["low"] is None
            else f"95% [{_num(area['low'])}, {_num(area['high'])}]"
        )
        flag = "  AT CHANCE" if report["at_chance"] else ""
        lines.append(f"  AUC {_num(area['value'])}  {interval}{flag}")
    best = report["best_threshold"]
    if best is not None:
        at = "approve none" if best["at"] is None else f"score >= {best['at']:g}"
        lines.append(f"  best threshold {at}: agreement {_num(best['agreement'])}")
    later = report["later"]
    lines.append(
        "  later: "
        + "  ".join(
            f"{kind.replace('_', ' ')} {v['decisions']} ({v['passed']} passed)"
            for kind, v in later.items()
        )
    )
    return lines


def verifiers_report(
    settings: Settings,
    engine: Engine,
    *,
    pipeline: str | None = None,
    stage: str | None = None,
    since: datetime | None = None,
) -> list[dict[str, Any]]:
    """The figures of every stage with decisions, in one read transaction.
    A filter naming what neither the config nor the record knows is a
    `UsageError`; a known stage without decisions has 0 of them."""
    with read_tx(engine) as conn:
        counts = decision_counts(conn, pipeline=pipeline, stage=stage, since=since)
    if not counts:
        _check_known(settings, pipeline, stage)
    return build(settings, counts, pipeline, stage)


def _check_known(settings: Settings, pipeline: str | None, stage: str | None) -> None:
    if pipeline is not None and pipeline not in settings.pipelines:
        known = ", ".join(sorted(settings.pipelines)) or "none"
        raise UsageError(f"--pipeline {pipeline!r}: no such pipeline (the config has {known})")
    chosen = [settings.pipelines[pipeline]] if pipeline else list(settings.pipelines.values())
    if stage is not None and all(p.stage(stage) is None for p in chosen):
        raise UsageError(f"--stage {stage!r}: no such stage in {pipeline or 'any pipeline'}")
