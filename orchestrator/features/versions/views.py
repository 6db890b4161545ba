"""What `pipelines` says: each pipeline's versions, which one this host's
config loads now (current), and where the unfinished tasks of each stand."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from orchestrator.config import PipelineConfig, Settings
from orchestrator.features.versions import kept, store
from orchestrator.features.versions.definition import SHORT, PipelineVersion
from orchestrator.features.versions.recording import breaking, held, loaded_versions, on_change
from orchestrator.storage import repo


def pipeline_versions(conn: Connection, settings: Settings) -> list[dict[str, Any]]:
    """Every pipeline the config or the database knows, by name: its
    versions oldest first (the current one last when no host recorded it
    yet), then the unfinished tasks from before versions were recorded
    (`version` null), if any."""
    loaded = loaded_versions(settings)
    rows = store.all_versions(conn)
    counts = store.unfinished(conn)
    names = sorted(set(loaded) | {r.pipeline for r in rows} | {c.pipeline for c in counts})
    found = []
    for name in names:
        current = loaded.get(name)
        entries: dict[str | None, dict[str, Any]] = {}
        for row in rows:
            if row.pipeline == name:
                entries[row.hash] = _entry(row.hash, current, row.first_seen.isoformat(), row.host)
        if current is not None and current.hash not in entries:
            entries[current.hash] = _entry(current.hash, current, None, None)
        for count in counts:
            if count.pipeline == name:
                blank = _entry(count.version, current, None, None)
                entry = entries.setdefault(count.version, blank)
                entry["unfinished"] += count.tasks
                entry["stages"][count.stage] = count.tasks
        # A null version (tasks from before) sorts last.
        ordered = sorted(entries.values(), key=lambda e: e["version"] is None)
        found.append(
            {
                "pipeline": name,
                "configured": current is not None,
                "current": None if current is None else current.hash,
                "versions": ordered,
            }
        )
    return found


def _entry(
    version: str | None, current: PipelineVersion | None, first_seen: str | None, host: str | None
) -> dict[str, Any]:
    return {
        "version": version,
        "current": current is not None and version == current.hash,
        "first_seen": first_seen,
        "host": host,
        "unfinished": 0,
        "stages": {},
    }


def own_stages(conn: Connection, task: repo.TaskSnapshot) -> tuple[str, ...] | None:
    """`Feature.stages_of`: the stage names of the task's own version, which
    `approve` and `reject --to` check it against (None: from before versions,
    or a version no row shows: the config's)."""
    version = store.task_version(conn, task.id)
    return None if version is None else store.stage_names(conn, version)


def short(version: str | None) -> str:
    """A version as tables print it: its first digits, or `-` for none."""
    return "-" if version is None else version[:SHORT]


def task_version(
    conn: Connection, settings: Settings, task: repo.TaskSnapshot
) -> tuple[dict[str, Any] | None, PipelineConfig | None]:
    """`explain`'s `version` part (None for a task from before versions
    were recorded), and the pipeline the task runs on this host when that
    is its own older version's rather than the configured one."""
    version = store.task_version(conn, task.id)
    if version is None:
        return None, None
    current = loaded_versions(settings).get(task.pipeline)
    older = current is None or current.hash != version
    pinned, refused = None, None
    if older:
        try:
            pinned = kept.load(settings.state_root, version)
        except kept.Tampered as exc:
            refused = str(exc)
    configured = settings.pipeline(task.pipeline)
    upgrade = None
    if older and current and configured and on_change(configured) == "upgrade":
        names = store.stage_names(conn, version)
        problem = breaking(names, configured.stage_names, task.stage)
        upgrade = "moves" if problem is None else held(task, problem, current)
    part = {
        "version": version,
        "current": None if current is None else current.hash,
        "older": older,
        "kept": not older or pinned is not None,
        "refused": refused,
        "hosts": store.hosts_of(conn, version),
        "upgrade": upgrade,
        "restarted": restarted_at(conn, task),
    }
    return part, (None if upgrade == "moves" else pinned)


def restarted_at(conn: Connection, task: repo.TaskSnapshot) -> int | None:
    """The attempt at which the task's stage's score window restarted
    because `migrate` changed its verifier (None: it did not)."""
    from orchestrator.features.versions.migrate import RESTARTED

    moved = [
        t
        for t in repo.transitions_of(conn, task.id)
        if t["event"] == "migrate" and RESTARTED in (t["reason"] or "")
    ]
    if not moved or moved[-1]["to_state"].split(":")[0] != task.stage:
        return None
    at = moved[-1]["at"]
    return 1 + sum(1 for a in repo.attempts_of(conn, task.id, task.stage) if a.started_at < at)


def version_line(part: dict[str, Any] | None) -> str | None:
    """`explain`'s line for a task on an older version, or whose verifier
    `migrate` changed; None otherwise."""
    if part is None:
        return None
    restarted = part.get("restarted")
    if not part["older"]:
        if restarted is None:
            return None
        return f"verifier changed at attempt {restarted}: window restarted"
    current = "the config lacks its pipeline" if part["current"] is None else short(part["current"])
    said = f"runs version {short(part['version'])}, older than the current ({current}): "
    if part.get("upgrade") == "moves":
        return said + "moves to the current version at its next claim (on_change = upgrade)"
    if part.get("upgrade"):
        return said + str(part["upgrade"])
    if part["kept"]:
        return said + "its own version's stages, kept on this host"
    if part.get("refused"):
        return said + f"waits: its kept copy on this host is refused ({part['refused']})"
    hosts = ", ".join(part.get("hosts") or []) or "no host"
    return said + f"waits: not held on this host (held by {hosts})"
