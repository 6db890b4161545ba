"""A first end-to-end path through the CLI on both backends."""

from __future__ import annotations

from support import Project, check_invariants, cli_json


def test_gate_approve_complete(project: Project) -> None:
    assert project.cli("add", "t1", "--title", "First").exit_code == 0
    assert project.cli("tick").exit_code == 0
    assert project.state("t1") == "research:awaiting_approval"
    assert project.cli("approve", "t1").exit_code == 0
    assert project.cli("tick").exit_code == 0
    assert project.state("t1") == "complete"
    rows = cli_json(project.cli("list", "--json"))
    assert rows[0]["state"] == "complete"
    assert check_invariants(project.db_url, allow_running=False) == []
