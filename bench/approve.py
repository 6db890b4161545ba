"""`approve` while a tick works (`python -m bench --only approve`).

The test suite proves causally that `approve` never waits on a tick (it
commits while the tick is held inside its workers); what it costs is
measured here, where a loaded machine moves both sides of the ratio alike:
a real `approve` process while a real tick holds four attempts open, against
the same `approve` with no tick running, interleaved round by round.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from bench.__main__ import add_tasks, orch, project, report, timed

PY = sys.executable

# Gated tasks wait at `plan`; work tasks' workers note that they started and
# wait for a go-file (the tick is held inside them while `approve` runs).
CONFIG = """
[orchestrator]
workspace_root = "tasks"
state_root = "state"
lock_file = "orchestrator.lock"

[[pipelines.gated.stages]]
name = "plan"
gate = true
worker = ["/bin/true"]
verifier = ["/bin/echo", "{{\\"pass\\": true, \\"score\\": 1.0}}"]

[[pipelines.default.stages]]
name = "work"
worker = ["{py}", "-c", "{held}", "{folder}"]
verifier = ["/bin/echo", "{{\\"pass\\": true, \\"score\\": 1.0}}"]
"""

HELD = (
    "import os, sys, time; d = sys.argv[1]; "
    "open(os.path.join(d, 'started-' + str(os.getpid())), 'w').close(); "
    "[time.sleep(0.01) for _ in iter(lambda: os.path.exists(os.path.join(d, 'go')), True)]"
)


def _started(folder: Path) -> int:
    return len(list(folder.glob("started-*")))


def bench_approve(work: Path, rounds: int) -> list[tuple[str, bool]]:
    signals = work / "approve-signals"
    signals.mkdir(parents=True)
    config = CONFIG.format(py=PY, held=HELD.replace('"', '\\"'), folder=signals)
    env = project(work / "approve", config)
    ratios: list[float] = []
    for n in range(rounds):
        lines = "\n".join(
            f'{{"slug": "g{n}-{side}", "title": "bench", "pipeline": "gated"}}'
            for side in ("idle", "busy")
        )
        subprocess.run(
            orch("add", "--from", "-"),
            env=env,
            input=lines,
            text=True,
            check=True,
            capture_output=True,
        )
        subprocess.run(orch("tick", "-q"), env=env, check=True, capture_output=True)
        idle = timed(orch("approve", f"g{n}-idle"), env=env)
        add_tasks(env, 4, prefix=f"w{n}")
        (signals / "go").unlink(missing_ok=True)
        for old in signals.glob("started-*"):
            old.unlink()
        tick = subprocess.Popen(
            orch("tick", "-q", "--jobs", "4"), env=env, stdout=subprocess.DEVNULL
        )
        try:
            while _started(signals) < 4:
                if tick.poll() is not None:
                    raise SystemExit(f"approve bench: the tick ended early ({tick.returncode})")
                time.sleep(0.01)
            busy = timed(orch("approve", f"g{n}-busy"), env=env)
        finally:
            (signals / "go").touch()
            tick.wait()
        ratios.append(busy / idle)
    return [report("approve while a tick holds 4 attempts / approve, no tick", ratios, 1.5)]
