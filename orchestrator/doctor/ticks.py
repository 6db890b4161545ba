"""Is cron ticking? When this project's line is in the crontab, the newest
tick of this host must be younger than three of its intervals: a cron log
that says nothing is then a quiet cron, not a dead one."""

from __future__ import annotations

from sqlalchemy import Engine

from orchestrator.config import Settings
from orchestrator.doctor.report import Check, Level

MISSED = 3  # intervals without a tick before doctor warns


def tick_checks(engine: Engine, settings: Settings) -> list[Check]:
    from orchestrator.runner.identity import host_name
    from orchestrator.scaffold.cron import LOG_NAME, installed_line, schedule_seconds
    from orchestrator.storage.db import read_tx
    from orchestrator.views.ticks import ago, last_tick_age

    with read_tx(engine) as conn:
        found = last_tick_age(conn, host_name())
    line = installed_line(settings.config_path) if settings.config_path else None
    seen = "no tick yet on this host" if found is None else f"last tick {ago(found[1])} ago"
    if line is None:
        return [] if found is None else [Check(Level.OK, "ticks", seen)]
    interval = schedule_seconds(" ".join(line.split()[:5])) or 60
    every = f"cron ticks every {ago(interval)}"
    if found is not None and found[1] <= MISSED * interval:
        return [Check(Level.OK, "ticks", f"{every}; {seen}")]
    log = settings.base_dir / LOG_NAME
    return [
        Check(
            Level.WARN,
            "ticks",
            f"{every}, but {seen}: is cron running, and does the line work? "
            f"(its errors are in {log}; try the line by hand)",
        )
    ]
