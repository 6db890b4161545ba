"""A verifier for orchestrator: run the workspace's tests, print a JSON verdict.

Written by `orchestrator init`; edit it freely. It runs in the task's
workspace (the current folder) and prints one line of JSON:

    {"pass": bool, "score": passed / (passed + failed + errors),
     "reasons": [the first failures], "next_hint": what to fix next}

The next attempt's worker receives `next_hint` as {hint} in its prompt and
as ORCHESTRATOR_NEXT_HINT. Extra arguments are passed on to pytest. The exit
status does not matter to orchestrator once a verdict is printed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

MAX_REASONS = 5
COUNTS = re.compile(r"(\d+) (passed|failed|errors?)\b")


def main(extra: list[str]) -> int:
    command = [sys.executable, "-m", "pytest", "-q", "-rfE", "--tb=no", "-p", "no:cacheprovider"]
    try:
        done = subprocess.run(
            command + extra, capture_output=True, text=True, errors="replace", check=False
        )
    except OSError as exc:
        return emit(False, 0.0, [f"could not run pytest: {exc}"], "make pytest runnable here")
    output = done.stdout + done.stderr
    counts = {"passed": 0, "failed": 0, "errors": 0}
    for number, kind in COUNTS.findall(output):
        counts["errors" if kind.startswith("error") else kind] += int(number)
    total = sum(counts.values())
    if done.returncode == 5 or total == 0:
        return emit(False, 0.0, ["no tests ran"], "add tests that exercise the change")
    failures = [
        line.strip() for line in output.splitlines() if line.startswith(("FAILED ", "ERROR "))
    ][:MAX_REASONS]
    passed = done.returncode == 0
    hint = "" if passed else "make these pass: " + "; ".join(failures)
    summary = f"{counts['passed']} passed, {counts['failed']} failed, {counts['errors']} errors"
    return emit(passed, counts["passed"] / total, [summary, *failures], hint[:2000])


def emit(passed: bool, score: float, reasons: list[str], hint: str) -> int:
    verdict = {"pass": passed, "score": round(score, 4), "reasons": reasons, "next_hint": hint}
    print(json.dumps(verdict))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
