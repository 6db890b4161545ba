"""`orchestrator explain SLUG`: why a task is where it is, and what the next
tick will do with it, as data (the command renders it as text or JSON).

Everything here was answerable before only with SQL over three tables and
the config: the last verdict, how many attempts are left, how close the
plateau rule is, the no-change streak, a backoff's end, a running
attempt's lease and host, how long a gate has waited, and for a halted
task the rule that fired and the command that resumes it.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine

from orchestrator.agents.budget import budget_of, spent
from orchestrator.config import PipelineConfig, Settings, StageConfig
from orchestrator.domain.pipeline import Status
from orchestrator.domain.plateau import detect_plateau
from orchestrator.domain.waits import waiting_line
from orchestrator.ext.views import Explainer
from orchestrator.features.landing import views as landing
from orchestrator.features.memory import views as memory
from orchestrator.features.pools.views import holds_back, pool_state
from orchestrator.features.versions.views import task_version
from orchestrator.runner import ProcessIdentity
from orchestrator.storage import repo
from orchestrator.storage.db import db_now, read_tx
from orchestrator.tick.host import HostIdentity
from orchestrator.views.reports import attempt_dir
from orchestrator.views.suggest import unknown_task

_HALT_RULES = {
    "score_plateau": (
        "the plateau rule: the last scores did not improve enough on the best before them"
    ),
    "max_attempts": "the run used every attempt the stage allows",
    "interrupted": "max_interrupts: attempts were interrupted too many times in a row",
    "unknown_stage": "the configuration has no such pipeline or stage any more",
    "manual": "a person halted it",
    "no_progress": "halt_after_no_change: attempts in a row left the workspace unchanged",
    "budget": "max_cost_usd: the recorded cost reached the budget",
    "land_refused": landing.HALT_RULE,
    "land_failed": landing.FAILED_RULE,
}


def explain_task(
    engine: Engine, settings: Settings, slug: str, explainers: Sequence[Explainer] = ()
) -> dict[str, Any]:
    """`explainers` are the features' views (`compose.explainers`): each
    one that speaks adds its own key, and its text lines under `notes`
    (a key present only then, so the engine's JSON stays as it was)."""
    with read_tx(engine) as conn:
        task = repo.get_task(conn, slug)
        if task is None:
            raise unknown_task(conn, slug)
        said = [e for e in (view(conn, settings, task) for view in explainers) if e is not None]
        now = db_now(conn)
        attempts = repo.attempts_of(conn, task.id, task.stage)
        transitions = repo.transitions_of(conn, task.id)
        history = repo.run_history(conn, task)
        backoff_until = repo.backoff_until(conn, task.id)
        version, pinned = task_version(conn, settings, task)  # its own version's stages
        pipeline = pinned or settings.pipeline(task.pipeline)
        stage = None if pipeline is None else pipeline.stage(task.stage)
        cost = _cost(conn, task, stage)
        waits = repo.waits_of(conn, [task.id]).get(task.id, [])
        pool = (
            None
            if stage is None or stage.pool is None
            else pool_state(conn, settings, stage.pool, now)
        )
        short = None if stage is None else _memory_short(conn, settings, task, stage)
    run = [a for a in attempts if a.run == task.run]
    last = next((a for a in reversed(run) if a.finished_at is not None), None)
    open_attempt = next((a for a in run if a.finished_at is None), None)
    data: dict[str, Any] = {
        "slug": task.slug,
        "state": str(task.state),
        "stage": task.stage,
        "status": task.status.value,
        "halt_reason": task.halt_reason,
        "run": task.run,
        "host": task.host,
        "now": now.isoformat(),
        "last_attempt": None if last is None else _verdict(last),
        "attempts": None,
        "plateau": None,
        "no_change": None,
        "backoff": None,
        "pending": None,
        "running": None,
        "gate": None,
        "halt": None,
        "cost": cost,
        "change": _change(settings, task),
        "landing": landing.landing_view(settings, task, transitions),
        # `add --after`: the tasks it waits on, and what that means now.
        "waits_on": [dataclasses.asdict(w) for w in waits],
        "waiting": waiting_line(waits) if task.status is Status.READY else None,
        "pool": pool,
        "version": version,
    }
    if stage is not None:
        used = history.counted_attempts
        data["attempts"] = {
            "used": used,
            "max": stage.max_attempts,
            "left": max(0, stage.max_attempts - used),
        }
        data["plateau"] = _plateau(stage, history.scores)
        data["no_change"] = {
            "limit": stage.halt_after_no_change,
            "streak": history.no_change_streak,
        }
    waiting = last is not None and last.outcome == "pending" and task.status is Status.READY
    if waiting and last is not None and stage is not None:
        data["pending"] = _pending(stage, history.pending_since, backoff_until, now, last)
    elif backoff_until is not None and backoff_until > now and task.status is Status.READY:
        data["backoff"] = {
            "until": backoff_until.isoformat(),
            "seconds_left": round((backoff_until - now).total_seconds(), 1),
            "waits": history.backoff_streak,
            "tries": None if stage is None else stage.backoff.tries,
        }
    if open_attempt is not None:
        data["running"] = {
            "attempt": open_attempt.number,
            "host": open_attempt.host,
            "pid": _running_pid(settings.state_root, task.slug, open_attempt),
            "started_at": open_attempt.started_at.isoformat(),
            "lease_expires_at": open_attempt.lease_expires_at.isoformat(),
            "lease_seconds_left": round((open_attempt.lease_expires_at - now).total_seconds(), 1),
        }
    since = _entered(transitions, str(task.state))
    if task.status in (Status.AWAITING_APPROVAL, Status.APPROVED) and since is not None:
        data["gate"] = {
            "since": since.isoformat(),
            "waited_seconds": round((now - since).total_seconds(), 1),
        }
    if task.status is Status.HALTED:
        why = next((t for t in reversed(transitions) if t["to_state"] == str(task.state)), None)
        data["halt"] = {
            "reason": task.halt_reason,
            "rule": _HALT_RULES.get(task.halt_reason or "", task.halt_reason),
            "detail": None if why is None else (why["reason"] or why["note"]),
            "at": None if why is None else why["at"].isoformat(),
            "resume": f"orchestrator resume {shlex.quote(task.slug)}"
            + (" --budget USD" if task.halt_reason == "budget" else ""),
            "resume_note": _raise_budget(cost) if task.halt_reason == "budget" else None,
        }
    data["next_tick"] = _next_tick(task, stage, data, settings, pipeline, short)
    data["rejected"] = _rejected(transitions)
    for explained in said:
        data[explained.key] = explained.data
    if said:
        data["notes"] = [line for explained in said for line in explained.lines]
    return data


# The events that begin a run of a stage (`add` begins the first).
_RUN_STARTS = frozenset({"add", "reject", "resume", "send_back", "stage_passed", "advance"})


def _rejected(transitions: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The reject (`reject [--to STAGE] --note`) that began the current run,
    with its note: what the stage's attempts are given as their hint."""
    began = next((t for t in reversed(transitions) if t["event"] in _RUN_STARTS), None)
    if began is None or began["event"] != "reject":
        return None
    return {
        "at": began["at"].isoformat(),
        "by": began["actor"],
        "to": began["to_state"],
        "note": began["note"],
    }


def _verdict(a: repo.AttemptSnapshot) -> dict[str, Any]:
    return {
        "attempt": a.number,
        "outcome": a.outcome,
        "pass": a.passed,
        "score": a.score,
        "reasons": list(a.reasons),
        "next_hint": a.next_hint,
        "error": a.error,
        "finished_at": None if a.finished_at is None else a.finished_at.isoformat(),
    }


def _pending(
    stage: StageConfig,
    since: datetime | None,
    recheck: datetime | None,
    now: datetime,
    last: repo.AttemptSnapshot,
) -> dict[str, Any]:
    """A task waiting on a pending verdict: since when, its recheck, its timeout."""
    timeout_at = None if since is None else since + timedelta(seconds=stage.pending_timeout)
    due = recheck is not None and recheck > now
    return {
        "since": None if since is None else since.isoformat(),
        "recheck_at": recheck.isoformat() if due and recheck is not None else None,
        "seconds_left": round((recheck - now).total_seconds(), 1)
        if due and recheck is not None
        else 0.0,
        "timeout": stage.pending_timeout,
        "timeout_at": None if timeout_at is None else timeout_at.isoformat(),
        "reasons": list(last.reasons),
    }


def _plateau(stage: StageConfig, scores: tuple[float, ...]) -> dict[str, Any]:
    policy = stage.plateau
    decision = detect_plateau(scores, policy)
    needed = policy.effective_min_attempts
    return {
        "patience": policy.patience,
        "min_delta": policy.min_delta,
        "mode": policy.mode,
        "min_attempts": needed,
        "scores": list(scores),
        "window": list(scores[-policy.patience :]) if scores else [],
        "best_before": decision.best_before,
        "best_within": decision.best_within,
        "threshold": decision.threshold,
        "plateau": decision.plateau,
        # Scored attempts still needed before the rule may fire at all.
        "scores_until_rule_applies": max(0, needed - len(scores)),
        "reason": decision.reason,
    }


def _entered(transitions: list[dict[str, Any]], state: str) -> datetime | None:
    for row in reversed(transitions):
        if row["to_state"] == state:
            at = row["at"]
            return at if isinstance(at, datetime) else None
    return None


def _next_tick(
    task: repo.TaskSnapshot,
    stage: StageConfig | None,
    data: dict[str, Any],
    settings: Settings,
    pipeline: PipelineConfig | None,
    memory_short: str | None = None,
) -> str:
    slug = shlex.quote(task.slug)
    if task.status is Status.HALTED:
        note = data["halt"]["resume_note"]
        again = "lands it again" if task.halt_reason == "land_refused" else "makes it ready again"
        return f"nothing: the task is halted; `{data['halt']['resume']}` {again}" + (
            f" ({note})" if note else ""
        )
    if task.status in (Status.COMPLETE, Status.CANCELLED):
        return "nothing: the task is finished"
    lands = landing.next_tick(task, data["landing"])
    if lands is not None:
        return lands
    if task.status is Status.AWAITING_APPROVAL:
        return (
            f"nothing until a person runs `orchestrator approve {slug}` "
            f"or `orchestrator reject {slug} --note ...`"
        )
    if task.status is Status.APPROVED:
        names = () if pipeline is None else pipeline.stage_names
        to = "?"
        if task.stage in names:  # the stage after it, or the pipeline's end
            index = names.index(task.stage)
            to = names[index + 1] if index + 1 < len(names) else "complete"

        return f"moves it from {task.stage} to {to}"
    if stage is None:
        return f"halts it (unknown_stage): the configuration has no stage {task.stage!r}"
    if task.status is Status.RUNNING:
        running = data["running"]
        if running is None:
            return "nothing yet: the claim is being made"
        if running["lease_seconds_left"] < 0:
            return "recovers the attempt (its lease expired) and counts it as crashed"
        return (
            f"leaves it: attempt {running['attempt']} runs on {running['host']}; "
            f"its lease runs to {running['lease_expires_at']}"
        )
    if data["waiting"] is not None:
        return f"nothing: it {data['waiting']}"
    number = (data["last_attempt"] or {}).get("attempt", 0) + 1
    where = ""
    if settings.affinity == "host" and task.host is not None:
        where = f" (only a tick on host {task.host} claims it)"
    pending = data["pending"]
    if pending is not None:
        return (
            f"waits on a pending verdict; attempt {number} of {stage.name} rechecks it "
            f"after {pending['recheck_at'] or 'now'} (counted failed after "
            f"{pending['timeout_at']}){where}"
        )
    held = None if data["pool"] is None else holds_back(data["pool"])
    if held is not None and task.status is Status.READY:
        return f"waits: {held}; then attempt {number} of {stage.name} runs{where}"
    if data["backoff"] is not None:
        return (
            f"waits: the worker asked to be retried later; attempt {number} of "
            f"{stage.name} runs after {data['backoff']['until']}{where}"
        )
    if memory_short is not None:
        return f"{memory_short}; then attempt {number} of {stage.name} runs{where}"
    return f"runs attempt {number} of {stage.name}{where}"


def _memory_short(
    conn: Connection, settings: Settings, task: repo.TaskSnapshot, stage: StageConfig
) -> str | None:
    """What a tick on this host would wait for (each host judges its own
    memory); None when it would not, or the task is another host's."""
    here = HostIdentity.here().host
    pinned = settings.affinity == "host" and task.host not in (None, here)
    if task.status is not Status.READY or pinned:
        return None
    return memory.holds_back(conn, settings, stage, here)


def _cost(conn: Connection, task: repo.TaskSnapshot, stage: StageConfig | None) -> dict[str, Any]:
    """What the task spent, and the budget that halts it (`agents.budget`)."""
    budget = budget_of(conn, task, stage)
    return {
        "spent_usd": spent(conn, task.id),
        "budget_usd": None if budget is None else budget.limit,
        "budget_scope": None if budget is None else budget.scope,
        "budget_spent_usd": None if budget is None else budget.spent,
        "budget_left_usd": None if budget is None else max(0.0, budget.limit - budget.spent),
        "budget_reached": budget is not None and budget.reached,
    }


def _raise_budget(cost: dict[str, Any]) -> str:
    """`resume` needs a budget above what was spent, or the next tick halts
    it again; how much more to spend is the person's call, so no figure.
    Kept apart from the command, which must stay one that can be pasted."""
    spent_usd = cost["budget_spent_usd"] or cost["spent_usd"]
    return f"USD above the ${spent_usd:.4f} spent"


def _running_pid(state_root: Path, slug: str, attempt: repo.AttemptSnapshot) -> int | None:
    """The running attempt's process: the row has a pid only once the
    attempt is recorded, but each command notes its identity in the
    attempt's state folder as it starts (the verifier's, when there is
    one, is the later). None when no note is there yet, or the attempt
    runs on a host whose state folder this one cannot see."""
    if attempt.pid is not None:
        return attempt.pid
    folder = attempt_dir(state_root, slug, attempt)
    for name in ("verifier", "worker", "setup"):
        note = ProcessIdentity.read_note(folder / f"{name}.proc")
        if note is not None:
            return note.pid
    return None


def _change(settings: Settings, task: repo.TaskSnapshot) -> dict[str, Any] | None:
    """Where a branch task's change is, and how it lands (by hand, today)."""
    from orchestrator.views.branch import branch_state

    state = branch_state(settings, task)
    return None if state is None else state.as_dict()
