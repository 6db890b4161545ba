"""The task page and the score curve mark the best and the restored attempt."""

from __future__ import annotations

import json
import re
from pathlib import Path

from support import copy_database, make_project

from orchestrator.config import load_settings
from orchestrator.storage.db import make_engine
from orchestrator.views.sparkline import score_lines
from orchestrator.web.pages import Pages
from orchestrator.web.render import Links

SCORES = (
    "import json, os; n = int(os.environ['ORCHESTRATOR_ATTEMPT']); "
    "print(json.dumps({'pass': False, 'score': {1: 0.3, 2: 0.8}.get(n, 0.5)}))"
)
STAGES = f"""
[[pipelines.default.stages]]
name = "research"
max_attempts = 10
plateau = {{ patience = 2 }}
worker = ["true"]
verifier = {json.dumps(["python3", "-c", SCORES])}
"""


def test_the_page_the_curve_and_show_mark_best_and_restored(
    tmp_path: Path, template_db: Path
) -> None:
    project = make_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db"), STAGES
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "t1", "--title", "plateau").returncode == 0
    assert project.run("tick").returncode == 0
    assert project.state("t1") == "research:halted"
    # Attempt 3's work was put back (as `restore` marks it; the e2e tests run it).
    engine = make_engine(project.db_url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("UPDATE attempts SET restored_at = finished_at WHERE number = 3")
        html = Pages(engine, load_settings(config=project.config)).task(Links(), "t1")
    finally:
        engine.dispose()
    assert re.search(r'<circle class="best" data-attempt="2"', html)
    assert re.search(r'<rect class="restored" data-attempt="3"', html)
    assert html.count('class="best"') == 2  # the ring, and the table's mark
    row = re.search(r'<tr class="attempt" data-number="3">.*?</tr>', html, re.S)
    assert row is not None and '<span class="restored">restored</span>' in row.group(0)
    shown = project.run("show", "t1")
    assert "research ▃▇▅▅ 0.3 → 0.5  best #2, restored #3" in shown.stdout
    data = json.loads(project.run("show", "t1", "--json").stdout)
    assert [(a["best"], a["restored"]) for a in data["attempts"]] == [
        (False, False),
        (True, False),
        (False, True),
        (False, False),
    ]


def test_score_lines_without_marks_are_as_before() -> None:
    rows = [{"stage": "a", "outcome": "failed", "score": 0.1, "number": 1}]
    assert score_lines(rows) == ["a ▂ 0.1"]
