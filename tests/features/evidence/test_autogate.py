"""Gates that earn autonomy, through real ticks and scripted people
deciding through the library face (as `approve`/`reject` do): the gate
waits until the verifier earned it, then opens by itself as `verifier`
with the evidence on the transition, audits every `audit_every`-th
verdict, and a person's reject of an audit hands the gate back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import text
from support import Project, make_project

from orchestrator.api.project import Project as Library


def lib_config(tmp_path: Path) -> Path:
    return tmp_path / "proj" / "orchestrator.toml"


def _config(
    folder: Path, url: str, auto_after: int = 20, precision: float = 0.79, audit_every: int = 10
) -> Library:
    stages = (
        "\n[[pipelines.default.stages]]\n"
        'name = "review"\n'
        'gate = "auto"\n'
        f"auto_after = {auto_after}\n"
        f"auto_precision = {precision}\n"
        f"audit_every = {audit_every}\n"
        'worker = ["true"]\n'
        """verifier = ["sh", "-c", "echo '{\\"pass\\": true, \\"score\\": 0.9}'"]\n"""
    )
    project = make_project(folder, url, stages, retry_interval=0)
    return Library.open(project.config, db=url)


def _tick(lib: Library, *slugs: str) -> None:
    for slug in slugs:
        lib.add(slug, slug)
    assert lib.tick().exit_status == 0


def _states(lib: Library, *slugs: str) -> dict[str, str]:
    return {slug: str(lib.explain(slug).to_dict()["state"]) for slug in slugs}


def _gate(lib: Library, slug: str) -> dict[str, Any]:
    found = lib.explain(slug).to_dict()["autogate"]
    assert isinstance(found, dict)
    return found


def _opened_by_verifier(lib: Library, slug: str) -> list[str]:
    return [
        str(row.reason)
        for row in lib.history(slug)
        if row.event == "approve" and row.actor == "verifier"
    ]


def test_a_gate_earns_autonomy_is_audited_and_a_reject_hands_it_back(
    tmp_path: Path, migrated_url: str
) -> None:
    with _config(tmp_path / "proj", migrated_url) as lib:
        first = [f"a-{i}" for i in range(19)]
        _tick(lib, *first)
        assert set(_states(lib, *first).values()) == {"review:awaiting_approval"}
        assert _gate(lib, "a-0")["mode"] == "person"
        for slug in first:
            lib.approve(slug, by="alice")
        # 19 of 19: the bound (0.875) is enough, N is one short.
        _tick(lib, "a-19")
        assert _states(lib, "a-19") == {"a-19": "review:awaiting_approval"}
        lib.approve("a-19", by="alice")

        gate = _gate(lib, "a-19")
        assert (gate["mode"], gate["decisions"], gate["approved"]) == ("auto", 20, 20)
        assert abs(gate["bound"] - 0.8808) < 0.001
        assert any("next verdict opens by itself" in t for t in lib.explain("a-19").notes)

        second = [f"b-{i}" for i in range(10)]
        _tick(lib, *second)
        opened = {slug: _opened_by_verifier(lib, slug) for slug in second}
        auto = [slug for slug, reasons in opened.items() if reasons]
        waiting = [s for s, state in _states(lib, *second).items() if "awaiting" in state]
        # Decisions 21..29 opened by themselves, the 10th (audit_every) waits.
        assert len(auto) == 9 and len(waiting) == 1
        [audited] = waiting
        reason = opened[auto[0]][0]
        assert "N=20 human decisions, precision 1.000, Wilson bound 0.881" in reason
        assert reason.startswith("verifier ") and ": opens by itself: " in reason
        assert _gate(lib, audited)["streak"] == 10

        lib.reject(audited, "the verifier missed a bug", by="bob")
        gate = _gate(lib, audited)  # back at review, to run again
        assert (gate["mode"], gate["decisions"], gate["since_reject"]) == ("person", 0, True)

        # The next passing verdicts wait for a person (the rejected task's too).
        _tick(lib, "c-0")
        assert _states(lib, "c-0", audited) == {
            "c-0": "review:awaiting_approval",
            audited: "review:awaiting_approval",
        }
        assert _opened_by_verifier(lib, "c-0") == [] == _opened_by_verifier(lib, audited)
        line = lib.explain("c-0").notes  # "gate review (auto): next verdict waits for a person: …"
        assert any("waits for a person" in text for text in line), line

    # The verifier's own openings are no person's decisions to `verifiers`.
    project = Project(dir=tmp_path / "proj", db_url=migrated_url, config=lib_config(tmp_path))
    result = project.cli("verifiers", "--json")
    assert result.exit_code == 0, result.output
    [report] = json.loads(result.output)
    assert (report["decisions"], report["approved"]) == (21, 20)


def test_two_hosts_ticking_at_once_never_skip_an_audit(tmp_path: Path, migrated_url: str) -> None:
    """Two tick processes (two hosts by name) record passing verdicts at
    one auto gate at the same time: each reads the gate's count in its
    record's transaction, under the gate's lock (PostgreSQL) or the write
    lock (SQLite), so with `audit_every = 2` exactly every second verdict
    waits; two records reading the same count would open both (without
    the lock this test saw 7 and 9 audits of 10 on PostgreSQL)."""
    with _config(
        tmp_path / "proj", migrated_url, auto_after=2, precision=0.3, audit_every=2
    ) as lib:
        _tick(lib, "a-0", "a-1")
        for slug in ("a-0", "a-1"):
            lib.approve(slug, by="alice")
        assert _gate(lib, "a-0")["mode"] == "auto"
        slugs = [f"b-{i}" for i in range(20)]
        for slug in slugs:
            lib.add(slug, slug)
        ticks = []
        for host in ("host-a", "host-b"):  # each its own folder (its own tick lock)
            folder = tmp_path / host
            folder.mkdir()
            config = folder / "orchestrator.toml"
            config.write_text(lib_config(tmp_path).read_text())
            project = Project(dir=folder, db_url=migrated_url, config=config)
            ticks.append(
                project.popen("tick", "--jobs", "2", extra_env={"ORCHESTRATOR_HOST": host})
            )
        for tick in ticks:
            _out, err = tick.communicate(timeout=300)
            assert tick.returncode == 0, err
        states = _states(lib, *slugs)
        waiting = [s for s, state in states.items() if state == "review:awaiting_approval"]
        opened = [s for s in slugs if _opened_by_verifier(lib, s)]
        assert len(waiting) == 10 and len(opened) == 10, states
        assert set(waiting).isdisjoint(opened)
        with lib.engine.connect() as conn:
            hosts = conn.execute(text("SELECT DISTINCT host FROM attempts")).scalars().all()
        assert set(hosts) >= {"host-a", "host-b"}  # both recorded verdicts
