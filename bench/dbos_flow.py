"""DBOS Transact running what one orchestrator attempt runs: a durable
workflow of two steps, the worker (`/bin/true`) and the verifier (prints a
verdict, parsed), with its state in SQLite. `python -m bench --only dbos`
times this whole process for N workflows against an orchestrator tick of
N attempts (bench/dbos_compare.py).

    python bench/dbos_flow.py N SQLITE_FILE
"""

from __future__ import annotations

import json
import subprocess
import sys

from dbos import DBOS

WORKER = ["/bin/true"]
VERIFIER = ["/bin/echo", '{"pass": true, "score": 1.0}']


@DBOS.step()
def work() -> int:
    return subprocess.run(WORKER, check=True).returncode


@DBOS.step()
def verify() -> float:
    out = subprocess.run(VERIFIER, check=True, capture_output=True).stdout
    return float(json.loads(out)["score"])


@DBOS.workflow()
def attempt(task: int) -> float:
    work()
    return verify()


def main() -> None:
    count, path = int(sys.argv[1]), sys.argv[2]
    DBOS(config={"name": "bench", "system_database_url": f"sqlite:///{path}"})
    DBOS.launch()
    scores = [attempt(task) for task in range(count)]
    DBOS.destroy()
    if len(scores) != count or any(score != 1.0 for score in scores):
        raise SystemExit(f"dbos flow: {len(scores)} of {count} workflows scored")


if __name__ == "__main__":
    main()
