"""`orchestrator verdict` on a verdict that waits."""

from __future__ import annotations

import json

from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.domain.verdict import RECHECK_MIN


def test_the_verdict_command_shows_a_pending_verdict() -> None:
    text = 'CI: {"pending": true, "reasons": ["build"], "recheck_seconds": 0}'
    result = CliRunner().invoke(cli, ["verdict", "-"], input=text)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "pass": False,
        "score": 0.0,
        "reasons": ["build"],
        "next_hint": "",
        "pending": True,
        "recheck_seconds": RECHECK_MIN,
    }
