"""What `explain` and the pages say about a task's landing: the mode, where
a conflict goes, and the last time a landing sent the task back (with the
hint it gave the next attempt)."""

from __future__ import annotations

from typing import Any

from orchestrator.config import Settings
from orchestrator.domain.pipeline import Event, Status
from orchestrator.storage import repo

HALT_RULE = "land: the landing could not go on without a person"
FAILED_RULE = (
    "max_land_sendbacks: the landing sent the task back that many times and failed once more"
)


def landing_view(
    settings: Settings, task: repo.TaskSnapshot, transitions: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """None for a task whose pipeline does not land and never did."""
    pipeline = settings.pipeline(task.pipeline)
    config = None if pipeline is None else pipeline.landing
    back = next((t for t in reversed(transitions) if t["event"] == Event.SEND_BACK.value), None)
    if (config is None or not config.lands) and back is None and task.landed_commit is None:
        return None
    return {
        "mode": None if config is None else config.mode,
        "land_to": None if config is None else config.to,
        # On a `landing` task it is the move's intent, not a landing yet.
        "landed_commit": None if task.status is Status.LANDING else task.landed_commit,
        "pr_url": task.pr_url,
        "sent_back": None
        if back is None
        else {
            "at": back["at"].isoformat(),
            "to": back["to_state"],
            "reason": back["reason"],
            # The hint is the task's until its next attempt takes it.
            "hint": task.next_hint if task.hint_source == "landing" else None,
        },
    }


def next_tick(task: repo.TaskSnapshot, view: dict[str, Any] | None) -> str | None:
    if task.status is not Status.LANDING:
        return None
    mode = None if view is None else view["mode"]
    if mode == "merge":
        return (
            f"lands it: rebases {task.branch} onto {task.base_branch}'s tip, runs land_check, "
            f"moves {task.base_branch} (one landing per repository at a time)"
        )
    if mode == "pr":
        return f"lands it: pushes {task.branch} and opens a pull request"
    return "completes it (its pipeline no longer lands)"


def lines(view: dict[str, Any] | None) -> list[str]:
    if view is None:
        return []
    out: list[str] = []
    if view["landed_commit"]:
        out.append(f"  landed    {view['landed_commit'][:12]}")
    if view["pr_url"]:
        out.append(f"  pull req  {view['pr_url']}")
    back = view["sent_back"]
    if back is not None and view["landed_commit"] is None:
        out.append(f"  sent back to {back['to']} by the landing: {back['reason']}")
        if back["hint"]:
            for line in back["hint"].splitlines()[-12:]:
                out.append(f"            {line}")
    return out
