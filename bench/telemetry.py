"""What telemetry costs when its collector is down, measured round by
round in one run against the same tick without telemetry:

  no-op tick, telemetry on, collector down / no-op tick, telemetry off   <= 1.1
  tick of 10 attempts, collector down / the same tick, telemetry off     (info)

The second line is the one a collector's outage could slow: its spans are
made, fail to leave, and are counted as dropped (docs/how-to/telemetry.md)."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

from bench.__main__ import FULL_NOOP_TICK, add_tasks, info, orch, project, report, timed


def _down() -> str:
    """A port nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def bench_telemetry(work: Path, rounds: int, count: int = 10) -> list[tuple[str, bool | None]]:
    base = project(work / "telemetry-noop")
    base = {k: v for k, v in base.items() if not k.startswith("OTEL_")}
    down = {**base, "OTEL_EXPORTER_OTLP_ENDPOINT": _down()}
    noop = orch(*FULL_NOOP_TICK)
    template_env = project(work / "telemetry-busy")
    template_env = {k: v for k, v in template_env.items() if not k.startswith("OTEL_")}
    add_tasks(template_env, count)
    template = work / "telemetry-busy"
    idle_ratios, busy_ratios = [], []
    for index in range(rounds):
        plain = timed(noop, env=base)
        idle_ratios.append(timed(noop, env=down) / plain)
        times = {}
        for name, extra in (("off", {}), ("down", {"OTEL_EXPORTER_OTLP_ENDPOINT": _down()})):
            run = work / f"telemetry-{name}-{index}"
            shutil.copytree(template, run)
            env = {**template_env, **extra, "ORCHESTRATOR_CONFIG": str(run / "orchestrator.toml")}
            times[name] = timed(orch("tick"), env=env)
        busy_ratios.append(times["down"] / times["off"])
    return [
        report("telemetry: no-op tick, collector down / telemetry off", idle_ratios, 1.1),
        info(f"telemetry: tick of {count} attempts, collector down / off", busy_ratios),
    ]
