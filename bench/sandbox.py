"""The sandbox's cost: a trivial attempt (worker `true`, verifier `echo`)
inside bubblewrap against the same attempt on the host, measured round by
round in one run: (sandboxed tick of N - no-op tick) / (plain tick of N -
no-op tick). Target <= 1.5 (docs/how-to/sandbox.md)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from bench.__main__ import ONE_STAGE, add_tasks, orch, project, report, timed

SANDBOXED = (
    ONE_STAGE + 'sandbox = "bwrap"\n' + f"sandbox_ro = [{str(Path(sys.base_prefix).resolve())!r}]\n"
)


def bench_sandbox(work: Path, rounds: int, count: int = 40) -> list[tuple[str, bool | None]]:
    if shutil.which("bwrap") is None:
        print("sandbox: skipped (bubblewrap is not installed)")
        return []
    templates = {}
    for name, config in (("plain", ONE_STAGE), ("bwrap", SANDBOXED)):
        env = project(work / f"sandbox-{name}", config.replace("'", '"'))
        add_tasks(env, count)
        templates[name] = (work / f"sandbox-{name}", env)
    empty_env = project(work / "sandbox-empty")
    ratios = []
    for index in range(rounds):
        times = {}
        for name, (template, env) in templates.items():
            run = work / f"sandbox-{name}-{index}"
            shutil.copytree(template, run)
            times[name] = timed(
                orch("tick"), env={**env, "ORCHESTRATOR_CONFIG": str(run / "orchestrator.toml")}
            )
        idle = timed(orch("tick"), env=empty_env)
        ratios.append((times["bwrap"] - idle) / (times["plain"] - idle))
    return [report(f"sandbox: {count} attempts in bubblewrap vs on the host", ratios, 1.5)]
