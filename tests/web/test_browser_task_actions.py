"""Halt, resume and cancel clicked on the task page, and the live tail of a
running worker's output, in headless Chromium against a real `serve` and a
real `tick`."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright
from support import Project, check_invariants, copy_database, make_project
from web_support import _q, chromium_path, screenshot_path, serving

pytestmark = pytest.mark.e2e

# Prints a line every 0.1 s; when the test drops a token file, prints the
# token at once and notes (epoch ms) when it did; ends when told to.
CHATTY = """\
import json, pathlib, sys, time
folder = pathlib.Path(sys.argv[1])
n = 0
while not (folder / "finish").exists():
    n += 1
    print(f"line {n} <b>&amp;</b>", flush=True)
    token = folder / "token"
    if token.exists():
        word = token.read_text()
        print(word, flush=True)
        (folder / "printed.json").write_text(json.dumps({"at": time.time() * 1000}))
        token.unlink()
    time.sleep(0.1)
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as driver:
        launched = driver.chromium.launch(
            executable_path=chromium_path(), headless=True, args=["--no-sandbox"]
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context()
    opened = context.new_page()
    yield opened
    opened.screenshot(path=str(screenshot_path(request)), full_page=True)
    context.close()


def _project(tmp_path: Path, template_db: Path) -> Project:
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "chatty.py").write_text(CHATTY)
    control = tmp_path / "control"
    control.mkdir()
    stages = f"""
[[pipelines.default.stages]]
name = "work"
worker = [{_q(sys.executable)}, {_q(str(folder / "chatty.py"))}, {_q(str(control))}]
verifier = ["sh", "-c", "echo '{{\\"pass\\": true, \\"score\\": 1.0}}'"]
"""
    project = make_project(folder, copy_database(template_db, folder / "o.db"), stages)
    assert project.run("db", "upgrade").returncode == 0
    return project


def test_halt_resume_and_cancel_clicked(tmp_path: Path, page: Page, template_db: Path) -> None:
    project = _project(tmp_path, template_db)
    assert project.cli("add", "job", "--title", "A job").exit_code == 0
    with serving(project, page=page) as base:
        page.goto(base + "/task/job")
        page.fill("#action-note", "wait for the <review>")
        page.click("#halt")
        assert "Halted" in page.locator("#flash").inner_text()
        assert project.state("job") == "work:halted"
        assert page.locator("#resume").count() == 1
        assert page.locator("#halt").count() == 0
        page.click("#resume")
        assert "Resumed" in page.locator("#flash").inner_text()
        assert project.state("job") == "work"
        page.click("#cancel")
        assert "Cancelled" in page.locator("#flash").inner_text()
        assert project.state("job") == "work:cancelled"
        assert page.locator("#task-actions").count() == 0  # nothing left to do
    rows = project.query("SELECT event, actor, note FROM transitions WHERE seq > 1 ORDER BY seq")
    # By the page's user (here the login name `serve` runs as, as approve records).
    assert [(event, note) for event, _, note in rows] == [
        ("halt", "wait for the <review>"),
        ("resume", None),
        ("cancel", None),
    ]
    assert len({actor for _, actor, _ in rows}) == 1
    assert check_invariants(project.db_url) == []


def test_a_post_without_the_csrf_token_is_refused(tmp_path: Path, template_db: Path) -> None:
    import urllib.error
    import urllib.request

    project = _project(tmp_path, template_db)
    assert project.cli("add", "job", "--title", "A job").exit_code == 0
    with serving(project) as base:
        request = urllib.request.Request(
            f"{base}/task/job/halt", data=b"note=x", method="POST", headers=base.headers
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 403
        refused.value.close()
    assert project.state("job") == "work"


def test_the_live_tail_shows_what_the_worker_prints_within_a_second(
    tmp_path: Path, page: Page, template_db: Path
) -> None:
    project = _project(tmp_path, template_db)
    control = tmp_path / "control"
    assert project.cli("add", "job", "--title", "A job").exit_code == 0
    tick = project.popen("tick")
    try:
        with serving(project, page=page) as base:
            deadline = time.monotonic() + 60
            while project.state("job") != "work:running":
                assert time.monotonic() < deadline, "the tick never started the worker"
                time.sleep(0.05)
            page.goto(base + "/task/job")
            tail = page.locator("#live-tail")
            tail.locator("div.line", has_text="line 3").first.wait_for(timeout=30_000)
            # Shown as text: the worker's markup is not markup here.
            assert "<b>&amp;</b>" in tail.inner_text()
            assert tail.locator("b").count() == 0
            page.evaluate(
                """() => new Promise(ready => {
                    window.seenAt = null;
                    new MutationObserver(() => {
                        if (window.seenAt === null && document.getElementById("live-tail")
                                .textContent.includes("token-7f3a")) {
                            window.seenAt = Date.now();
                        }
                    }).observe(document.getElementById("live-tail"), {childList: true});
                    ready(true);
                })"""
            )
            (control / "token").write_text("token-7f3a")
            tail.locator("div.line", has_text="token-7f3a").wait_for(timeout=30_000)
            printed = json.loads((control / "printed.json").read_text())["at"]
            seen = page.evaluate("() => window.seenAt")
            latency_ms = seen - printed
            print(f"live tail latency: {latency_ms:.0f} ms")
            # Shown while the worker still runs (it ends on `finish`, below);
            # the latency is printed, not bounded: a loaded machine slows it.
            assert latency_ms >= 0, latency_ms
            (control / "finish").write_text("done")
            page.locator("#live-tail div.end").wait_for(timeout=30_000)
    finally:
        (control / "finish").write_text("done")
        _, err = tick.communicate(timeout=60)
    assert tick.returncode == 0, err
    assert project.state("job") == "complete"
