"""The `reliability report`: counters the reliability tests record, and the
block the root `conftest.py` prints per backend at the end of the session.

It lives beside the root conftest because under pytest-xdist only that one
runs in the controlling process: each worker sends its figures
(`transport`) when it finishes, and the controller adds them up (`merge`)
before printing.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from support import Project

CRASH = "crash points survived"
SWEEP = "statement sweep"
SOAK = "kill soak"
DB_FAULTS = "database faults"
HOSTILE = "hostile inputs rejected"
LANES = (CRASH, SWEEP, SOAK, DB_FAULTS, HOSTILE)


BACKENDS = {"sqlite": "SQLite", "pg": "PostgreSQL"}


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


@dataclass
class Lane:
    passed: int = 0
    total: int = 0


@dataclass
class ReliabilityReport:
    lanes: dict[str, Lane] = field(default_factory=lambda: {name: Lane() for name in LANES})
    escapes: int = 0
    sweep_scenarios: dict[str, tuple[int, int]] = field(default_factory=dict)
    soak_iterations: int = 0
    soak_recovered: int = 0
    soak_lost: int = 0
    soak_duplicated: int = 0
    soak_left_running: int = 0
    soak_survivors: int = 0
    soak_crashed_attempts: int = 0
    # Attempts whose worker never started (it left no note), and how many of
    # them were charged anyway (closed `crashed`): the latter must be 0.
    soak_never_started: int = 0
    soak_never_started_charged: int = 0
    soak_window: float = 0.0
    soak_recovery_seconds: list[float] = field(default_factory=list)
    soak_seed: int | None = None
    soak_modes: dict[str, int] = field(default_factory=dict)

    def count(self, lane: str, ok: bool, n: int = 1) -> None:
        entry = self.lanes[lane]
        entry.total += n
        entry.passed += n if ok else 0

    def escaped(self, n: int) -> None:
        self.escapes += n

    @property
    def used(self) -> bool:
        return any(lane.total for lane in self.lanes.values())

    def lines(self) -> list[str]:
        def ratio(name: str) -> str:
            lane = self.lanes[name]
            return f"{lane.passed}/{lane.total}" if lane.total else "not run"

        sweep = ratio(SWEEP)
        if self.sweep_scenarios:
            parts = ", ".join(f"{k} {ok}/{n}" for k, (ok, n) in self.sweep_scenarios.items())
            sweep += f" statements ({parts})"
        soak = ratio(SOAK)
        soak_detail = ""
        if self.soak_iterations:
            times = self.soak_recovery_seconds
            soak = (
                f"{self.soak_recovered}/{self.soak_iterations}, {self.soak_lost} lost, "
                f"{self.soak_duplicated} duplicated transitions, "
                f"{self.soak_survivors} surviving processes, "
                f"recovery p50 {percentile(times, 50):.2f} s p99 {percentile(times, 99):.2f} s"
            )
            soak_detail = (
                f"({self.soak_crashed_attempts} crashed attempts recovered, "
                f"{self.soak_never_started} never started of which "
                f"{self.soak_never_started_charged} charged, "
                f"{self.soak_left_running} left running; kills in [0, {self.soak_window:.2f} s]"
                f", seed {self.soak_seed})"
            )
        faults = ratio(DB_FAULTS)
        hostile = ratio(HOSTILE)
        rows = [
            (CRASH, ratio(CRASH)),
            (SWEEP, sweep),
            (SOAK, soak),
            (DB_FAULTS, faults + " with the documented exit status" * (faults != "not run")),
            (
                HOSTILE,
                hostile + f", {self.escapes} escapes from the workspace" * (hostile != "not run"),
            ),
        ]
        out = ["reliability report"] + [f"  {name:<27}{value}" for name, value in rows]
        if soak_detail:
            out.insert(4, f"  {'':<27}{soak_detail}")
        return out

    def transport(self) -> dict[str, Any]:
        """Every field, as JSON-ready data (what a worker sends the controller)."""
        return dataclasses.asdict(self)

    def merge(self, data: dict[str, Any]) -> None:
        """Add a worker's `transport()` figures to these."""
        for name, lane in data["lanes"].items():
            self.lanes[name].total += lane["total"]
            self.lanes[name].passed += lane["passed"]
        self.escapes += data["escapes"]
        for kind, (ok, n) in data["sweep_scenarios"].items():
            was_ok, was_n = self.sweep_scenarios.get(kind, (0, 0))
            self.sweep_scenarios[kind] = (was_ok + ok, was_n + n)
        for name in (
            "soak_iterations",
            "soak_recovered",
            "soak_lost",
            "soak_duplicated",
            "soak_left_running",
            "soak_survivors",
            "soak_crashed_attempts",
            "soak_never_started",
            "soak_never_started_charged",
        ):
            setattr(self, name, getattr(self, name) + data[name])
        self.soak_window = max(self.soak_window, data["soak_window"])
        self.soak_recovery_seconds += data["soak_recovery_seconds"]
        self.soak_seed = data["soak_seed"] if data["soak_seed"] is not None else self.soak_seed
        for mode, n in data["soak_modes"].items():
            self.soak_modes[mode] = self.soak_modes.get(mode, 0) + n

    def as_json(self) -> dict[str, Any]:
        return {
            "at": time.time(),
            "lanes": {k: {"passed": v.passed, "total": v.total} for k, v in self.lanes.items()},
            "escapes": self.escapes,
            "sweep": self.sweep_scenarios,
            "soak": {
                "iterations": self.soak_iterations,
                "recovered": self.soak_recovered,
                "lost": self.soak_lost,
                "duplicated": self.soak_duplicated,
                "left_running": self.soak_left_running,
                "survivors": self.soak_survivors,
                "crashed_attempts": self.soak_crashed_attempts,
                "never_started": self.soak_never_started,
                "never_started_charged": self.soak_never_started_charged,
                "kill_window": self.soak_window,
                "p50": percentile(self.soak_recovery_seconds, 50),
                "p99": percentile(self.soak_recovery_seconds, 99),
                "seed": self.soak_seed,
                "modes": self.soak_modes,
            },
        }


# `new_project(stages=GATED, name=None, **orchestrator_settings) -> Project` (conftest)
ProjectFactory = Callable[..., Project]


# Each process's reports, one per backend (`new_reports`), in `config.stash`.
REPORTS = pytest.StashKey[dict[str, ReliabilityReport]]()


def new_reports() -> dict[str, ReliabilityReport]:
    return {name: ReliabilityReport() for name in BACKENDS}
