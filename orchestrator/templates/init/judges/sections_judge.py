"""A verifier for orchestrator: does FILE have every required heading?

Written by `orchestrator init`; edit it freely. Usage, in the task's
workspace (the current folder):

    python3 sections_judge.py RESEARCH.md "## Scope" "## Plan" "## Risks"

Prints one line of JSON: the score is the share of headings present, and the
verdict passes when all are there and each section has some text. A person
still reads the result when the stage is a gate; this only catches the
obviously unfinished.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MIN_WORDS = 20


def main(args: list[str]) -> int:
    if len(args) < 2:
        print("usage: sections_judge.py FILE HEADING...", file=sys.stderr)
        return 2
    name, headings = args[0], args[1:]
    try:
        text = Path(name).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return emit(False, 0.0, [f"{name} was not written"], f"write {name}")
    lines = [line.strip() for line in text.splitlines()]
    missing = [h for h in headings if h not in lines]
    found = len(headings) - len(missing)
    words = len(text.split())
    reasons = [f"{found} of {len(headings)} sections present", f"{words} words"]
    if missing:
        return emit(False, found / len(headings), reasons, f"{name} lacks: {', '.join(missing)}")
    if words < MIN_WORDS * len(headings):
        return emit(False, 0.9, reasons, f"{name} is too thin; say more in each section")
    return emit(True, 1.0, reasons, "")


def emit(passed: bool, score: float, reasons: list[str], hint: str) -> int:
    print(json.dumps({"pass": passed, "score": score, "reasons": reasons, "next_hint": hint}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
