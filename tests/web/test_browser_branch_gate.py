"""A branch task's gate in headless Chromium: the whole change (a file the
worker committed itself, one it left uncommitted, a new untracked one and
a deleted one), then the stage's part; and Reject sends it to implement."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from e2e.test_task_branch import branch_project
from playwright.sync_api import Page
from support import copy_database, make_project
from test_browser import browser, page  # noqa: F401 - the fixtures, shared
from web_support import serving

pytestmark = pytest.mark.e2e

NOTE = "keep.txt must keep its first line"


def test_the_gate_page_shows_the_whole_change_and_rejects_to_implement(
    tmp_path: Path,
    page: Page,  # noqa: F811 - the fixture
    template_db: Path,
) -> None:
    project = make_project(tmp_path / "proj", copy_database(template_db, tmp_path / "o.db"))
    branch_project(project)
    text = project.config.read_text().replace(
        'worker = ["true"]', 'worker = ["sh", "-c", "echo looks fine > REVIEW.md"]'
    )
    project.config.write_text(text)
    assert project.run("db", "upgrade").returncode == 0
    assert project.run("add", "fix", "--title", "Fix <b>it</b>").returncode == 0
    for _ in range(2):
        assert project.run("tick").returncode == 0
    with serving(project, page=page) as base:
        page.goto(base + "/gate/fix")
        tables = page.locator("table.files")
        whole = tables.nth(0).locator("tr").all_inner_texts()[1:]
        assert sorted(row.replace("\t", " ") for row in whole) == [
            "added REVIEW.md",
            "added committed.txt",
            "added untracked.txt",
            "deleted gone.txt",
            "modified keep.txt",
        ]
        assert tables.nth(1).locator("tr").all_inner_texts()[1:] == ["added\tREVIEW.md"]
        assert "+changed" in page.locator("pre.diff").first.inner_text()
        assert page.locator("b").count() == 0  # the title is text, not markup
        page.select_option("#reject-to", "implement")
        page.fill("#note", NOTE)
        page.click("#reject")
        assert "Rejected" in page.locator("#flash").inner_text()
    assert project.state("fix") == "implement"
    assert project.run("tick").returncode == 0
    hints = project.query("SELECT hint FROM attempts WHERE stage = 'implement' ORDER BY id")
    assert [h for (h,) in hints] == ["", NOTE]
    log = subprocess.run(
        ["git", "-C", str(project.dir / "repo"), "log", "--format=%s", "main..task/fix"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert "fix: implement (attempt 2)" in log  # the reject's run: one commit more
