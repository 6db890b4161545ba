"""The gate page in headless Chromium: the agent's answer is read as text
that fits the page, and Reject can send the task back to an earlier stage."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page
from test_browser import browser, page  # noqa: F401 - the fixtures, shared
from test_gate_answer import answering_project
from web_support import serving

pytestmark = pytest.mark.e2e

NOTE = "the last page is still empty: fix the pager, not the review"
FITS = "e => e.scrollWidth <= e.clientWidth"  # no line runs past the right edge


def test_answer_fits_and_reject_to_implement_runs_implement_next(
    tmp_path: Path,
    page: Page,  # noqa: F811 - the fixture
) -> None:
    project = answering_project(tmp_path / "proj", f"sqlite:///{tmp_path / 'o.db'}", "claude-json")
    with serving(project, page=page) as base:
        page.goto(base + "/gate/pager")
        answer = page.locator("#answer")
        assert "The pager is wrong at the last page." in answer.inner_text()
        assert '"type"' not in answer.inner_text()
        assert answer.evaluate(FITS)
        raw = page.locator("#answer-raw pre")
        assert not raw.is_visible()  # one click away
        page.click("#answer-raw summary")
        assert '"type":"result"' in raw.inner_text()
        assert raw.evaluate(FITS)

        options = page.locator("#reject-to option")
        assert options.all_inner_texts() == ["implement", "code_review (this stage again)"]
        assert page.locator("#reject-to").input_value() == "code_review"  # as before
        page.select_option("#reject-to", "implement")
        page.fill("#note", NOTE)
        page.click("#reject")
        assert "Rejected" in page.locator("#flash").inner_text()
        assert project.state("pager") == "implement"

        assert project.run("tick").returncode == 0
        hints = project.query("SELECT hint FROM attempts WHERE stage = 'implement' ORDER BY number")
        assert [h for (h,) in hints] == ["", NOTE]

        page.goto(base + "/history?task=pager&event=reject")
        row = page.locator("table.history tr").nth(1)  # the newest reject
        states = row.locator("td.state").all_inner_texts()
        assert states == ["code_review:awaiting_approval", "implement"]
        assert f"rejected to implement; note: {NOTE}" in row.inner_text()


def test_a_stage_the_page_did_not_offer_is_refused(
    tmp_path: Path,
    page: Page,  # noqa: F811 - the fixture
) -> None:
    project = answering_project(tmp_path / "proj", f"sqlite:///{tmp_path / 'o.db'}", "text")
    with serving(project, page=page) as base:
        page.goto(base + "/gate/pager")
        # A hand-made form: the server checks the stage, not the page.
        page.evaluate(
            "() => { const s = document.querySelector('#reject-to');"
            " s.add(new Option('later', 'docs')); s.value = 'docs'; }"
        )
        page.fill("#note", NOTE)
        page.click("#reject")
        flash = page.locator("#flash").inner_text()
        assert "reject --to 'docs'" in flash and "implement, code_review" in flash
        assert project.state("pager") == "code_review:awaiting_approval"
