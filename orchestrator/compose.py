"""The one composition root: the only module of the engine's side that
imports `orchestrator.features`, and hands their list to what runs them.

Config, storage and the tick never import a feature; a caller that wants
a tick with the project's features asks here (`ticker`), the CLI its
commands (`commands`), `explain` their views (`explainers`), and `Project`
hands `add` the features' `added` from here (`tasks_added`). Importing
this module loads no tick and no database code: `orchestrator --help`
reads the commands from here."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.features import FEATURES

if TYPE_CHECKING:
    from datetime import datetime

    from sqlalchemy import Connection, Engine

    from orchestrator.config import Settings
    from orchestrator.ext.views import Explainer
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
    from orchestrator.tick.ticker import Ticker

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
    from orchestrator.ext import registry

    registry.tasks_added(FEATURES, conn, settings, added, now)


def commands(engine_commands: Mapping[str, str]) -> dict[str, str]:
    """The CLI's verbs: the engine's, then each feature's (`Feature.commands`).
    A feature may not take a verb another already has: two modules
    answering one verb would depend on registration order."""
    merged = dict(engine_commands)
    for feature in FEATURES:
        for name, where in feature.commands.items():
            if name in merged:
                raise RuntimeError(f"feature {feature.name!r}: command {name!r} is taken")
            merged[name] = where
    return merged


def explainers() -> tuple[tuple[str, Explainer], ...]:
    """Each feature's `explain` view (`Feature.explain`), imported now: only
    `explain` asks, once per call."""
    found: list[tuple[str, Explainer]] = []
    for feature in FEATURES:
        if feature.explain is not None:
            found.append((feature.name, _resolve(feature.explain)))
    return tuple(found)


def stages_of(conn: Connection, task: Any) -> tuple[str, ...] | None:
    """The stages a gate command checks `task` against (`Feature.stages_of`):
    the first feature's answer, else None (the configured pipeline's)."""
    for feature in FEATURES:
        if feature.stages_of is not None:
            found = _resolve(feature.stages_of)(conn, task)
            if found is not None:
                return tuple(found)
    return None


def _resolve(where: str) -> Any:
    module, _, attribute = where.partition(":")
    return getattr(importlib.import_module(module), attribute)
