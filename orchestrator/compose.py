"""The one composition root: the only module of the engine's side that
imports `orchestrator.features`, and hands their list to what runs them.

Config, storage and the tick never import a feature; a caller that wants
a tick with the project's features asks here (`ticker`), and `Project`
hands `add` the features' `added` from here (`tasks_added`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime

from sqlalchemy import Connection, Engine

from orchestrator.config import Settings
from orchestrator.ext import registry
from orchestrator.features import FEATURES
from orchestrator.tick.progress import Progress
from orchestrator.tick.ticker import Ticker


def ticker(
    settings: Settings,
    engine: Engine,
    *,
    stop: threading.Event | None = None,
    say: Callable[[str], None] = lambda line: None,
    warn: Callable[[str], None] = lambda line: None,
    progress: Progress | None = None,
) -> Ticker:
    """A `Ticker` with every registered feature, in `FEATURES` order."""
    return Ticker(
        settings,
        engine,
        stop=stop,
        say=say,
        warn=warn,
        progress=progress,
        features=FEATURES,
    )


def tasks_added(
    conn: Connection, settings: Settings, added: Mapping[str, str], now: datetime
) -> None:
    """Every registered feature's `added`, inside `add`'s transaction."""
    registry.tasks_added(FEATURES, conn, settings, added, now)
