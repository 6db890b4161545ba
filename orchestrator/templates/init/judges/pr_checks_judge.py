"""A verifier for orchestrator: read a pull request's CI checks through `gh`.

Written by `orchestrator init`; edit it freely. For a stage that waits on
CI after `land = "pr"` opened the pull request. It runs `gh pr checks
BRANCH` (gh 2.23 or later; its tab-separated output when not on a terminal:
name, pass|fail|pending|skipping, elapsed, link) and prints one verdict:

- a check failed: {"pass": false, "reasons": ["check lint: fail", ...],
  "next_hint": "these checks fail on the pull request: lint, ..."}, so the
  next attempt's worker reads the failing checks' names in its hint;
- checks still running (or none reported yet): {"pending": true,
  "reasons": [...], "recheck_seconds": N}, which spends no attempt, and
  orchestrator asks again after N seconds (until the stage's
  `pending_timeout`);
- all passed (or skipped): {"pass": true, "score": 1.0}.

Options: `--branch NAME` (default `task/$ORCHESTRATOR_TASK`, the task's
branch), `--recheck SECONDS` (default 60), `--repo [HOST/]OWNER/NAME`
(default: GH_REPO, else gh's own guess from the folder's remotes). gh gets
its login from `gh auth login` or GH_TOKEN (list it in the stage's
`secrets`). When gh cannot run (not installed, not logged in, no pull
request for the branch), no verdict is printed: the judge exits 2 with gh's
reason on stderr, which orchestrator records as the attempt's error (a
made-up verdict would send the worker after a problem it does not have).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

MAX_REASONS = 10
NOT_YET = "no checks reported"  # gh's words when CI has not started on the branch


def cannot_run(why: str) -> int:
    print(f"pr_checks_judge: {why}", file=sys.stderr)
    return 2


def main(argv: list[str]) -> int:
    options = {"--branch": "", "--recheck": "60", "--repo": ""}
    args = list(argv)
    while args:
        flag = args.pop(0)
        if flag not in options or not args:
            return cannot_run(f"usage: [--branch NAME] [--recheck SECONDS] [--repo R] ({flag}?)")
        options[flag] = args.pop(0)
    branch = options["--branch"] or _task_branch()
    if not branch:
        return cannot_run("no branch: pass --branch, or run as a stage (ORCHESTRATOR_TASK)")
    try:
        recheck = max(1, int(float(options["--recheck"])))
    except ValueError:
        return cannot_run(f"--recheck {options['--recheck']!r} is not a number of seconds")
    gh = shutil.which("gh")
    if gh is None:
        return cannot_run("gh is not installed (the GitHub CLI reads the pull request's checks)")
    command = [gh, "pr", "checks", branch]
    if options["--repo"]:
        command += ["--repo", options["--repo"]]
    env = {**os.environ, "GH_PROMPT_DISABLED": "1", "GH_NO_UPDATE_NOTIFIER": "1"}
    env["NO_COLOR"] = "1"
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, errors="replace", env=env, check=False
        )
    except OSError as exc:
        return cannot_run(f"cannot start gh: {exc.strerror or exc}")
    checks = _rows(done.stdout)
    if not checks:
        said = _first_line(done.stderr)
        if NOT_YET in said:
            return emit({"pending": True, "reasons": [said], "recheck_seconds": recheck})
        return cannot_run(f"gh pr checks {branch} failed: {said}")
    failed = [name for name, bucket in checks if bucket == "fail"]
    pending = [name for name, bucket in checks if bucket == "pending"]
    passed = [name for name, bucket in checks if bucket in ("pass", "skipping")]
    if failed:
        reasons = [f"check {name}: fail" for name in failed][:MAX_REASONS]
        if pending:
            reasons.append("still running: " + ", ".join(pending))
        return emit(
            {
                "pass": False,
                "score": round(len(passed) / len(checks), 4),
                "reasons": reasons,
                "next_hint": "these checks fail on the pull request: " + ", ".join(failed),
            }
        )
    if pending:
        reasons = [f"check {name}: pending" for name in pending][:MAX_REASONS]
        return emit({"pending": True, "reasons": reasons, "recheck_seconds": recheck})
    return emit(
        {"pass": True, "score": 1.0, "reasons": [f"{len(checks)} checks passed"], "next_hint": ""}
    )


def _task_branch() -> str:
    task = os.environ.get("ORCHESTRATOR_TASK", "")
    return f"task/{task}" if task else ""


def _rows(stdout: str) -> list[tuple[str, str]]:
    """(name, bucket) per check: the name is everything before the last
    three tab-separated fields (a name may hold a tab; the rest cannot)."""
    rows = []
    for line in stdout.splitlines():
        fields = line.split("\t")
        if len(fields) >= 4:
            rows.append(("\t".join(fields[:-3]), fields[-3]))
    return rows


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:500] if lines else "(no output)"


def emit(verdict: dict[str, object]) -> int:
    print(json.dumps(verdict))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
