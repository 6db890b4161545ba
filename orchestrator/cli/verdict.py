"""`verdict`: what the tick would make of a verifier's output."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from orchestrator.errors import NoVerdictError, RefusedError


@click.command()
@click.argument("source", default="-", metavar="[FILE | -]")
def verdict(source: str) -> None:
    """Print the normalized verdict found in FILE (or stdin) as JSON.

    Applies exactly the rules the tick uses, so you can check what a verifier's
    output would count as. The rule: text that is one JSON object is the
    verdict; otherwise, among ```json fenced blocks and top-level {...} spans,
    the one written last that has a "pass", "score" or "pending" key; when no
    object has any, the last fenced object, else the last one. A pending
    verdict prints "pending": true and its clamped "recheck_seconds". Exits 65
    when the text holds no verdict.
    """
    from orchestrator.domain.verdict import parse_verdict

    if source == "-":
        data = sys.stdin.buffer.read()
    else:
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise RefusedError(f"cannot read {source}: {exc.strerror}") from exc
    found = parse_verdict(data.decode("utf-8", errors="replace"))
    if found is None:
        raise NoVerdictError("no JSON verdict found in the input")
    click.echo(json.dumps(found.to_dict(), ensure_ascii=False))
