#!/usr/bin/env python3
"""A small agent of your own, written by `orchestrator init --agent script`.

It sends the rendered prompt to an OpenAI-compatible chat completions
endpoint, applies the SEARCH/REPLACE blocks of the reply to the files of the
current folder (the task's workspace), prints the reply (the orchestrator
reads the verdict from it) and reports what it spent through the JSON file
named by $ORCHESTRATOR_USAGE_FILE. Standard library only: edit it freely.

Environment: AGENT_BASE_URL (default https://api.openai.com/v1), AGENT_MODEL
(default gpt-4o-mini), OPENAI_API_KEY, and optionally AGENT_USD_PER_MTOK_IN /
AGENT_USD_PER_MTOK_OUT (prices per million tokens) to report a cost.

An edit block in the reply looks like this (an empty SEARCH part creates the
file, or appends to it):

    path/to/file.py
    ```
    <<<<<<< SEARCH
    old text
    =======
    new text
    >>>>>>> REPLACE
    ```
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import urllib.request
from pathlib import Path

BLOCK = re.compile(
    r"^(?P<path>[^\n`]+)\n```[^\n]*\n<<<<<<< SEARCH\n(?P<search>.*?)^=======\n"
    r"(?P<replace>.*?)^>>>>>>> REPLACE\n```",
    re.DOTALL | re.MULTILINE,
)


def ask(prompt: str) -> tuple[str, dict[str, int]]:
    base = os.environ.get("AGENT_BASE_URL", "https://api.openai.com/v1").rstrip("/")
    body = {
        "model": os.environ.get("AGENT_MODEL", "gpt-4o-mini"),
        "messages": [{"role": "user", "content": prompt}],
    }
    request = urllib.request.Request(  # noqa: S310 (the endpoint is the user's own)
        base + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/json",
            "Authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", ""),
        },
    )
    with urllib.request.urlopen(request, timeout=600) as response:  # noqa: S310
        data = json.load(response)
    return data["choices"][0]["message"]["content"] or "", data.get("usage") or {}


def apply_edits(reply: str, root: Path) -> list[str]:
    changed = []
    for match in BLOCK.finditer(reply):
        target = (root / match["path"].strip()).resolve()
        if root.resolve() not in target.parents:
            print(f"script_agent: refusing to edit {target} outside the workspace", file=sys.stderr)
            continue
        old = target.read_text(encoding="utf-8") if target.exists() else ""
        search, replace = match["search"], match["replace"]
        if search and search not in old:
            print(f"script_agent: SEARCH text not found in {target}", file=sys.stderr)
            continue
        new = old.replace(search, replace, 1) if search else old + replace
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(new, encoding="utf-8")
        changed.append(str(target.relative_to(root.resolve())))
    return changed


def report_usage(usage: dict[str, int], seconds: float) -> None:
    path = os.environ.get("ORCHESTRATOR_USAGE_FILE")
    if not path:
        return
    tokens_in = int(usage.get("prompt_tokens", 0))
    tokens_out = int(usage.get("completion_tokens", 0))
    report: dict[str, object] = {
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "turns": 1,
        "duration_ms": int(seconds * 1000),
    }
    price_in = os.environ.get("AGENT_USD_PER_MTOK_IN")
    price_out = os.environ.get("AGENT_USD_PER_MTOK_OUT")
    if price_in and price_out:
        report["cost_usd"] = (tokens_in * float(price_in) + tokens_out * float(price_out)) / 1e6
    Path(path).write_text(json.dumps(report), encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt-file", required=True)
    parser.add_argument("--no-edit", action="store_true", help="review only: change no file")
    args = parser.parse_args()
    prompt = Path(args.prompt_file).read_text(encoding="utf-8")
    started = time.monotonic()
    try:
        reply, usage = ask(prompt)
    except OSError as exc:  # the endpoint is down: no verdict, the attempt fails
        print(f"script_agent: the model endpoint failed: {exc}", file=sys.stderr)
        return 1
    report_usage(usage, time.monotonic() - started)
    if not args.no_edit:
        for name in apply_edits(reply, Path.cwd()):
            print(f"script_agent: edited {name}", file=sys.stderr)
    print(reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
