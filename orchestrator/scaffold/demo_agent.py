"""The simulated agent and verifier that `orchestrator demo` runs.

Real stages run coding agents (`claude -p`, `codex exec -`) and verifiers
(pytest, a reviewing model). The demo must work on a fresh machine with no
network and no API keys, so its stages run this module instead, in the same
way: as child processes, with the prompt on stdin and the `ORCHESTRATOR_*`
environment the tick gives every child. Each call takes a few tens of
milliseconds and uses only the standard library.

    python -m orchestrator.scaffold.demo_agent work     # a worker: prompt on stdin
    python -m orchestrator.scaffold.demo_agent verify   # a verifier: prints a verdict
    python -m orchestrator.scaffold.demo_agent review   # a worker that is its own verifier

How well the "agent" does is scripted by a line in the task's body, which
reaches the worker through the prompt's `{body}` placeholder:

    Simulation: implement=learns review=steady

`steady` (the default) does good work at once; `learns` falls short on its
first attempt of a run and succeeds once it is handed a hint (the verifier's
`next_hint`, or a reviewer's `reject --note`); `stuck` scores the same every
time, whatever it is told, so the task halts as `score_plateau`.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

BEHAVIOURS = ("steady", "learns", "stuck")
PASS_AT = 0.8
_SIMULATION = re.compile(r"^\s*simulation:\s*(.+)$", re.IGNORECASE | re.MULTILINE)


def behaviour_for(prompt: str, stage: str) -> str:
    """The behaviour the task's body asks for at `stage` (default `steady`)."""
    match = _SIMULATION.search(prompt)
    if match is None:
        return "steady"
    for item in match.group(1).split():
        name, _, value = item.partition("=")
        if name.strip() == stage and value.strip() in BEHAVIOURS:
            return value.strip()
    return "steady"


def quality(behaviour: str, hint: str) -> float:
    """How good this attempt's work is, from 0 to 1."""
    if behaviour == "stuck":
        return 0.42
    if behaviour == "learns" and not hint:
        return 0.55
    return 0.92


def _context() -> tuple[str, str, str, Path, str]:
    env = os.environ
    workspace = Path(env.get("ORCHESTRATOR_WORKSPACE") or Path.cwd())
    return (
        env.get("ORCHESTRATOR_TASK", "demo"),
        env.get("ORCHESTRATOR_STAGE", "stage"),
        env.get("ORCHESTRATOR_ATTEMPT", "1"),
        workspace,
        env.get("ORCHESTRATOR_NEXT_HINT", ""),
    )


def work(prompt: str) -> int:
    """Do the (simulated) work: write the result into the task's workspace."""
    task, stage, attempt, workspace, hint = _context()
    behaviour = behaviour_for(prompt, stage)
    score = quality(behaviour, hint)
    result = {"task": task, "stage": stage, "attempt": int(attempt), "quality": score}
    if hint:
        result["hint_applied"] = hint
    (workspace / f"{stage}.json").write_text(json.dumps(result, indent=2) + "\n")
    notes = f"# {stage}, attempt {attempt}\n\nSimulated work (behaviour: {behaviour}).\n"
    if hint:
        notes += f"\nApplied the feedback: {hint}\n"
    (workspace / f"{stage}.md").write_text(notes)
    print(f"simulated agent: {stage} attempt {attempt} for {task} done")
    if hint:
        print(f"simulated agent: applied the feedback {hint!r}")
    return 0


def verdict_for(stage: str, workspace: Path) -> dict[str, object]:
    """Judge what `work` left in the workspace, like a test suite would."""
    try:
        result = json.loads((workspace / f"{stage}.json").read_text())
        score = float(result["quality"])
    except (OSError, ValueError, KeyError, TypeError):
        return {
            "pass": False,
            "score": 0.0,
            "reasons": [f"no {stage}.json in the workspace"],
            "next_hint": f"write {stage}.json",
        }
    passed = score >= PASS_AT
    if passed:
        return {"pass": True, "score": score, "reasons": ["all checks pass"], "next_hint": ""}
    if score < 0.5:
        hint = "the benchmark is still slow; try a different approach"
        reasons = ["3 of 7 checks fail: search takes 2.1 s, the target is 0.5 s"]
    else:
        hint = "handle the empty-input case and add a test for it"
        reasons = ["1 of 4 checks fails: empty input raises IndexError"]
    return {"pass": False, "score": score, "reasons": reasons, "next_hint": hint}


def verify() -> int:
    """Print a verdict the way a chatty verifier does: prose, then fenced JSON."""
    _task, stage, _attempt, workspace, _hint = _context()
    verdict = verdict_for(stage, workspace)
    print(f"Checked the {stage} work in {workspace.name}.")
    print("```json")
    print(json.dumps(verdict))
    print("```")
    return 0


def review(prompt: str) -> int:
    """A worker that is also its own verifier: the stage has no `verifier`."""
    _task, stage, attempt, workspace, hint = _context()
    score = quality(behaviour_for(prompt, stage), hint)
    (workspace / f"{stage}.md").write_text(f"# {stage}, attempt {attempt}\n\nLooks good.\n")
    verdict = {
        "pass": score >= PASS_AT,
        "score": score,
        "reasons": ["reviewed the diff"],
        "next_hint": "" if score >= PASS_AT else "split the change into smaller commits",
    }
    print("Review done. Verdict:")
    print(json.dumps(verdict))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    command = args[0] if args else ""
    if command == "work":
        return work(sys.stdin.read())
    if command == "verify":
        return verify()
    if command == "review":
        return review(sys.stdin.read())
    print("usage: python -m orchestrator.scaffold.demo_agent work|verify|review", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
