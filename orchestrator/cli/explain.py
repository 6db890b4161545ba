"""The `explain` command: renders `Project.explain` as text or JSON.

Kept out of `cli` (one `add_command` line there); SQLAlchemy is imported
only when the command runs, as for every other command.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from orchestrator.domain.money import money

if TYPE_CHECKING:
    from orchestrator.cli.app import App


@click.command()
@click.argument("slug")
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
@click.pass_obj
def explain(app: App, slug: str, as_json: bool) -> None:
    """Say why SLUG is where it is and what the next tick will do with it."""
    data = app.project().explain(slug).to_dict()
    if as_json:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    for line in render(data):
        click.echo(line)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _change_lines(data: dict[str, Any]) -> list[str]:
    """Where a branch task's change is, and at the end how to land it."""
    change = data.get("change")
    if change is None:
        return []
    tip = (change["last_commit"] or "none yet")[:12]
    place = change["workspace"] if change["worktree"] else f"{change['workspace']} (removed)"
    lines = [
        f"  branch    {change['branch']} from {change['base_branch']}, last commit {tip}",
        f"  worktree  {place}",
    ]
    if data["status"] in ("complete", "cancelled") and not (data.get("landing") or {}).get(
        "landed_commit"
    ):
        lines.append(
            f"  to land   git merge {change['branch']}   (on {change['base_branch']}, "
            "in the repository)"
        )
    return lines


def _wait_lines(data: dict[str, Any]) -> list[str]:
    """`add --after`: the tasks it waits on and where each one is."""
    if not data["waits_on"]:
        return []
    return ["  after     " + ", ".join(f"{w['slug']} ({w['state']})" for w in data["waits_on"])]


def render(data: dict[str, Any]) -> list[str]:
    """The explanation as lines of text, most important first."""
    from orchestrator.features.landing.views import lines as landing_lines

    lines = [f"{data['slug']}: {data['state']}", *_halt_lines(data["halt"])]
    lines.append(f"  next tick {data['next_tick']}")
    lines += _version_lines(data.get("version"))
    lines += _wait_lines(data)
    lines += _change_lines(data)
    lines += landing_lines(data.get("landing"))
    lines += _rejected_lines(data.get("rejected"))
    lines += _last_lines(data["last_attempt"])
    lines += [f"  {line}" for line in data.get("notes", ())]
    attempts = data["attempts"]
    if attempts is not None:
        lines.append(
            f"  attempts  {attempts['used']} of {attempts['max']} used, {attempts['left']} left"
        )
    plateau = data["plateau"]
    if plateau is not None:
        window = ", ".join(f"{s:.2f}" for s in plateau["window"]) or "none yet"
        lines.append(
            f"  plateau   best before the window {_num(plateau['best_before'])}, "
            f"window [{window}], threshold {_num(plateau['threshold'])} "
            f"(patience {plateau['patience']}, min_delta {plateau['min_delta']:g})"
        )
        lines += _until_lines(plateau["scores_until_rule_applies"], attempts)
        lines.append(f"            {plateau['reason']}")
    no_change = data["no_change"]
    if no_change is not None and no_change["limit"] is not None:
        lines.append(
            f"  no change {no_change['streak']} attempt(s) in a row; halts at {no_change['limit']}"
        )
    backoff = data["backoff"]
    if backoff is not None:
        lines.append(
            f"  backoff   until {backoff['until']} ({backoff['seconds_left']:g}s left; "
            f"wait {backoff['waits']} of {backoff['tries']})"
        )
    lines += _pending_lines(data["pending"])
    lines.extend(_pool_lines(data["pool"]))
    running = data["running"]
    if running is not None:
        lines.append(
            f"  running   attempt {running['attempt']} on {running['host']} "
            f"(pid {running['pid']}), "
            f"lease until {running['lease_expires_at']} ({running['lease_seconds_left']:g}s left)"
        )
    gate = data["gate"]
    if gate is not None:
        lines.append(f"  gate      waiting since {gate['since']} ({gate['waited_seconds']:g}s)")
    cost = data["cost"]
    budget = (
        ""
        if cost["budget_usd"] is None
        else f"; {cost['budget_scope']} budget {money(cost['budget_usd'])}, "
        f"{money(cost['budget_left_usd'])} left" + (" (reached)" if cost["budget_reached"] else "")
    )
    lines.append(f"  cost      {money(cost['spent_usd'])} recorded{budget}")
    return lines


def _until_lines(until: int, attempts: dict[str, Any] | None) -> list[str]:
    """How far the plateau rule is, true also when the run has fewer
    attempts left than the rule needs (it cannot fire in this run then)."""
    if not until:
        return []
    left = None if attempts is None else attempts["left"]
    if left is None or left >= until:
        return [f"            {until} more scored attempt(s) before the rule may halt"]
    return [
        f"            the rule needs {until} more scored attempt(s); "
        f"{left} attempt(s) left in this run, so it cannot halt it"
    ]


def _rejected_lines(rejected: dict[str, Any] | None) -> list[str]:
    if rejected is None:
        return []
    lines = [f"  rejected  to {rejected['to']} by {rejected['by']} at {rejected['at']}"]
    lines += [f"            note: {line}" for line in (rejected["note"] or "").splitlines()[:12]]
    return lines


def _halt_lines(halt: dict[str, Any] | None) -> list[str]:
    if halt is None:
        return []
    lines = [f"  halted    {halt['reason']}: {halt['rule']}"]
    if halt["detail"]:
        lines.append(f"            {halt['detail']}")
    lines.append(f"  resume    {halt['resume']}")
    if halt["resume_note"]:
        lines.append(f"            {halt['resume_note']}")
    return lines


def _last_lines(last: dict[str, Any] | None) -> list[str]:
    if last is None:
        return []
    verdict = f"attempt {last['attempt']} {last['outcome']}"
    if last["score"] is not None:
        verdict += f", score {last['score']:.2f}, pass {str(last['pass']).lower()}"
    lines = [f"  last      {verdict}"]
    lines += [f"            - {reason}" for reason in last["reasons"][:5]]
    if last["next_hint"]:
        lines.append(f"            hint: {last['next_hint']}")
    if last["error"]:
        lines.append(f"            error: {last['error'][:300]}")
    return lines


def _pending_lines(pending: dict[str, Any] | None) -> list[str]:
    """A task waiting on a pending verdict: when it rechecks, when it times out."""
    if pending is None:
        return []
    return [
        f"  pending   since {pending['since']}; rechecks after {pending['recheck_at'] or 'now'}",
        f"            counted failed after {pending['timeout_at']} "
        f"(pending_timeout {pending['timeout']:g}s)",
    ]


def _version_lines(version: dict[str, Any] | None) -> list[str]:
    from orchestrator.features.versions.views import version_line

    line = version_line(version)
    return [] if line is None else [f"  version   {line}"]


def _pool_lines(pool: dict[str, Any] | None) -> list[str]:
    if pool is None:
        return []
    from orchestrator.features.pools.views import pool_line

    return [f"  pool      {pool_line(pool)}"]
