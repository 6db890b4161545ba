"""A verifier for orchestrator: run the workspace's tests, print a JSON verdict.

Written by `orchestrator init`; edit it freely. It runs in the task's
workspace (the current folder) and prints one line of JSON:

    {"pass": bool, "score": passed / (passed + failed + errors),
     "reasons": [the first failures], "next_hint": what to fix next}

The next attempt's worker receives `next_hint` as {hint} in its prompt and
as ORCHESTRATOR_NEXT_HINT. Extra arguments are passed on to pytest. The exit
status does not matter to orchestrator once a verdict is printed.

`--python PATH` (first) names the interpreter of YOUR project, the one with
pytest and your dependencies (e.g. /home/me/myapp/.venv/bin/python);
without it, the Python running this script. When pytest cannot run there
(not installed, a usage or internal error), no verdict is printed: the
judge exits 2 with the reason on stderr, which orchestrator records as the
attempt's error. A made-up verdict ("no tests ran") would send the agent
after a problem it does not have. A conftest.py that no longer loads is the
change's doing, not the tool's: that is a failing verdict, with the import
error as its hint.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

MAX_REASONS = 5
COUNTS = re.compile(r"(\d+) (passed|failed|errors?)\b")


def cannot_run(why: str) -> int:
    print(f"pytest_judge: {why}", file=sys.stderr)
    return 2


def main(extra: list[str]) -> int:
    python = sys.executable
    if extra[:1] == ["--python"]:
        if len(extra) < 2:
            return cannot_run("--python needs the interpreter's path")
        python, extra = extra[1], extra[2:]
    try:
        probe = subprocess.run(
            [python, "-c", "import pytest"], capture_output=True, text=True, check=False
        )
    except OSError as exc:
        return cannot_run(f"cannot start {python}: {exc.strerror or exc}")
    if probe.returncode != 0:
        return cannot_run(
            f"pytest does not import in {python}: {last_line(probe.stderr)}; "
            "give --python your project's interpreter in orchestrator.toml"
        )
    command = [python, "-m", "pytest", "-q", "-rfE", "--tb=no", "-p", "no:cacheprovider"]
    done = subprocess.run(
        command + extra, capture_output=True, text=True, errors="replace", check=False
    )
    output = done.stdout + done.stderr
    counts = {"passed": 0, "failed": 0, "errors": 0}
    for number, kind in COUNTS.findall(output):
        counts["errors" if kind.startswith("error") else kind] += int(number)
    total = sum(counts.values())
    if "while loading conftest" in output:  # the change broke the test setup itself
        cause = error_line(output)
        return emit(False, 0.0, [f"conftest does not load: {cause}"], f"fix conftest: {cause}")
    if done.returncode in (2, 3, 4) and total == 0:  # interrupted, internal or usage error
        return cannot_run(f"pytest exited {done.returncode}: {error_line(output)}")
    if done.returncode == 5 or total == 0:
        return emit(False, 0.0, ["no tests ran"], "add tests that exercise the change")
    failures = [
        line.strip() for line in output.splitlines() if line.startswith(("FAILED ", "ERROR "))
    ][:MAX_REASONS]
    passed = done.returncode == 0
    hint = "" if passed else "make these pass: " + "; ".join(failures)
    summary = f"{counts['passed']} passed, {counts['failed']} failed, {counts['errors']} errors"
    return emit(passed, counts["passed"] / total, [summary, *failures], hint[:2000])


def error_line(text: str) -> str:
    """The line that says what went wrong (`pytest: error: ...`, `E   ...`),
    else the last one: pytest ends a usage error with its rootdir."""
    for line in text.splitlines():
        stripped = line.strip()
        if "usage:" in stripped:
            continue
        if "error:" in stripped.lower() or stripped.startswith("E "):
            return stripped[:500]
    return last_line(text)


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:500] if lines else "(no output)"


def emit(passed: bool, score: float, reasons: list[str], hint: str) -> int:
    verdict = {"pass": passed, "score": round(score, 4), "reasons": reasons, "next_hint": hint}
    print(json.dumps(verdict))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
