"""The web pages in headless Chromium, against a real `serve` process.

Each test clicks what a person clicks, checks the database afterwards, and
saves a screenshot under test-output/web/.
"""

from __future__ import annotations

import html
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright
from support import Project, copy_database, make_project
from web_support import (
    SCREENSHOTS,
    VERIFIER,
    _q,
    chromium_path,
    gated_project,
    screenshot_path,
    serving,
    tick_until_gate,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium_path()
    with sync_playwright() as driver:
        launched = driver.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context()
    opened = context.new_page()
    dialogs: list[str] = []
    opened.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    yield opened
    opened.screenshot(path=str(screenshot_path(request)), full_page=True)
    context.close()
    assert dialogs == [], f"a page opened a dialog (script ran): {dialogs}"


@pytest.fixture
def gated(tmp_path: Path, template_db: Path) -> Project:
    project = gated_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db")
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.cli("add", "doc", "--title", "Write the notes").exit_code == 0
    tick_until_gate(project, "doc")
    return project


def _hint_of(project: Project, slug: str, number: int) -> str:
    rows = project.query(
        "SELECT a.hint FROM attempts a JOIN tasks t ON t.id = a.task_id "
        "WHERE t.slug = :s AND a.number = :n",
        s=slug,
        n=number,
    )
    return str(rows[0][0])


def test_approve_by_clicking_moves_the_task(gated: Project, page: Page) -> None:
    with serving(gated, page=page) as base:
        page.goto(base + "/")
        queue = page.locator("#section-awaiting_approval")
        assert "doc" in queue.inner_text()
        queue.get_by_role("link", name="review").click()
        assert page.locator("#approval-hash").inner_text() in gated.run("show", "doc").stdout
        page.click("#approve")
        assert "Approved" in page.locator("#flash").inner_text()
        assert "research:approved" in page.inner_text("main")
        assert gated.state("doc") == "research:approved"
        assert gated.run("tick").returncode == 0
        page.goto(base + "/")
        assert gated.state("doc") in ("implement", "complete")
        assert page.locator('#section-awaiting_approval tr[data-slug="doc"]').count() == 0
        assert page.locator('tr.task-row[data-slug="doc"] td.state').inner_text() in (
            "implement",
            "complete",
        )


def test_reject_note_becomes_the_next_attempts_hint(gated: Project, page: Page) -> None:
    note = "Cite the <b>RFC</b> & keep it short"
    with serving(gated, page=page) as base:
        page.goto(base + "/gate/doc")
        page.fill("#note", note)
        page.click("#reject")
        assert "Rejected" in page.locator("#flash").inner_text()
        assert gated.state("doc") == "research"
        tick_until_gate(gated, "doc")
        assert _hint_of(gated, "doc", 2) == note
        page.goto(base + "/task/doc")
        row = page.locator('tr.attempt[data-number="2"] td.hint')
        assert row.inner_text() == note  # shown as text, not markup
        page.goto(base + "/gate/doc")
        assert f"hint: {note}" in page.locator(".markdown").inner_text()


def test_score_curve_carries_the_recorded_scores(
    tmp_path: Path, page: Page, template_db: Path
) -> None:
    project = gated_project(
        tmp_path / "proj",
        copy_database(template_db, tmp_path / "proj" / "o.db"),
        scores="0.2,0.5,0.8",
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.cli("add", "curve", "--title", "Climb").exit_code == 0
    tick_until_gate(project, "curve")
    recorded = [row[0] for row in project.query("SELECT score FROM attempts ORDER BY number")]
    assert recorded == [0.2, 0.5, 0.8]
    with serving(project, page=page) as base:
        page.goto(base + "/task/curve")
        curve = page.locator("#stage-curve-research svg.curve")
        points = curve.locator("circle.score")
        shown = [float(points.nth(i).get_attribute("data-score") or "nan") for i in range(3)]
        assert points.count() == 3
        assert shown == recorded
        assert curve.locator("line.pass-threshold").count() == 1
        assert "pass 0.8" in (curve.text_content() or "")


def test_approval_after_the_workspace_changed_is_refused(
    gated: Project, page: Page, request: pytest.FixtureRequest
) -> None:
    with serving(gated, page=page) as base:
        page.goto(base + "/gate/doc")
        seen = page.locator("#approval-hash").inner_text()
        (gated.dir / "tasks" / "doc" / "notes.md").write_text("# Notes\n\nchanged meanwhile\n")
        page.click("#approve")
        assert "changed since you looked" in page.locator("#flash").inner_text()
        refused = screenshot_path(request)
        page.screenshot(path=str(refused.with_name(refused.stem + "-refused.png")), full_page=True)
        assert gated.state("doc") == "research:awaiting_approval"
        now = page.locator("#approval-hash").inner_text()
        assert now != seen
        assert "changed meanwhile" in page.inner_text("main")  # the page shows what it binds
        page.click("#approve")  # the re-shown page carries the new hash
        assert gated.state("doc") == "research:approved"


def test_a_script_title_is_shown_as_text(gated: Project, page: Page) -> None:
    title = "<script>alert(1)</script>"
    body = "<img src=x onerror=alert(2)> **bold**"
    assert gated.cli("add", "evil", "--title", title, "--body", body).exit_code == 0
    with serving(gated, page=page) as base:
        page.goto(base + "/")
        row = page.locator('tr.task-row[data-slug="evil"]')
        assert title in row.inner_text()
        page.goto(base + "/task/evil")
        assert title in page.locator("h1").inner_text()
        assert page.locator("main script").count() == 0
        assert page.locator("main img").count() == 0
        assert page.locator(".markdown strong").inner_text() == "bold"
        answer = page.request.get(base + "/task/evil")
        assert "default-src 'none'" in answer.headers["content-security-policy"]
        assert html.escape(title, quote=False) in answer.text()


def test_a_post_without_the_csrf_token_is_refused(gated: Project, page: Page) -> None:
    with serving(gated, page=page) as base:
        page.goto(base + "/gate/doc")
        answer = page.request.post(base + "/gate/doc/approve", form={"expect": "x"})
        assert answer.status == 403
        assert "CSRF" in answer.text()
        # The real form with its token field taken out: refused too.
        page.evaluate("document.querySelectorAll('input[name=csrf]').forEach(e => e.remove())")
        page.click("#approve")
        assert "CSRF" in page.inner_text("body")
        assert gated.state("doc") == "research:awaiting_approval"


def test_serve_on_a_public_address_without_auth_refuses(gated: Project, page: Page) -> None:
    done = gated.run("serve", "--host", "0.0.0.0", "--port", "0", timeout=60)
    assert done.returncode == 1
    assert "refusing to serve on 0.0.0.0 without authentication" in done.stderr
    page.set_content(f"<pre>$ orchestrator serve --host 0.0.0.0\n{html.escape(done.stderr)}</pre>")


def test_signed_in_user_is_the_approvals_actor(
    gated: Project, browser: Browser, request: pytest.FixtureRequest
) -> None:
    users = gated.dir / "users"
    added = gated.cli(
        "serve", "--users", str(users), "--add-user", "alice", input="s3cret-pass\n" * 2
    )
    assert added.exit_code == 0, added.output
    assert users.read_text().startswith("alice:$argon2")
    with serving(gated, "--users", str(users)) as base:
        context = browser.new_context(
            http_credentials={"username": "alice", "password": "s3cret-pass"}
        )
        page = context.new_page()
        stranger = browser.new_context()
        assert stranger.request.get(base + "/").status == 401
        assert stranger.request.get(base + "/healthz").status == 200
        stranger.close()
        page.goto(base + "/gate/doc")
        page.click("#approve")
        page.screenshot(path=str(screenshot_path(request)), full_page=True)
        context.close()
    rows = gated.query("SELECT actor FROM transitions WHERE event = 'approve'")
    assert rows == [("alice",)]


def test_a_page_on_another_loopback_port_cannot_reject_a_gate(
    browser: Browser, tmp_path: Path, template_db: Path
) -> None:
    # review finding: csrf_ok accepts any cookie value of 32+ characters (never
    # issued by the server, not signed) and waves through `Origin: null`. A page
    # on ANY other 127.0.0.1 port (a worker's dev server, say) sets its own
    # `orch_csrf` cookie (cookies ignore ports), then posts a form through a
    # 307 redirect: the browser sends Origin: null, the tossed cookie and the
    # matching field, and the gate is rejected with the page's note - which
    # becomes the next attempt's hint. Sign (HMAC) the token and refuse a null
    # or missing Origin (check Sec-Fetch-Site) on POST.
    import http.server
    import threading

    from web_support import free_port, gated_project, serving, tick_until_gate

    project = gated_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db")
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.cli("add", "doc", "--title", "Doc").exit_code == 0
    tick_until_gate(project, "doc")
    with serving(project) as base:
        tossed = "A" * 43
        evil_page = f"""<!doctype html><body><script>
document.cookie = "orch_csrf={tossed}; path=/";
</script><form id=f method=post action="/redir">
<input name=csrf value="{tossed}"><input name=note value="INJECTED HINT">
</form><script>document.getElementById('f').submit()</script></body>"""

        class Evil(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = evil_page.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.send_response(307)
                self.send_header("Location", f"{base}/gate/doc/reject")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        port = free_port()
        evil = http.server.HTTPServer(("127.0.0.1", port), Evil)
        threading.Thread(target=evil.serve_forever, daemon=True).start()
        try:
            context = browser.new_context()
            page = context.new_page()
            # The victim has signed in: a 403 is the CSRF check's, not the token's.
            access = f"orch_access_{base.rsplit(':', 1)[1]}"
            context.add_cookies([{"name": access, "value": str(base.token), "url": base}])
            # Wait on the forged post's answer itself, not a fixed sleep.
            reject = f"{base}/gate/doc/reject"
            with page.expect_response(lambda r: r.url == reject, timeout=30_000) as answer:
                page.goto(f"http://127.0.0.1:{port}/")
            assert answer.value.request.method == "POST"
            assert answer.value.status == 403
            context.close()
        finally:
            evil.shutdown()
            evil.server_close()  # else an unclosed-socket warning fails the teardown
    rejected = project.query("SELECT actor, note FROM transitions WHERE event = 'reject'")
    assert rejected == [], rejected
    assert project.state("doc") == "research:awaiting_approval"


# A research stage whose first attempt is a worker error (no score), then
# 0.3 and a pass at 0.9; an implement stage with one attempt and
# `pass_score = 0`, stopped at its gate.
CURVE_WORKER = """\
import pathlib, sys
counter = pathlib.Path(sys.argv[1])
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
sys.exit(3 if n == 1 else 0)
"""
CURVE_STAGES = """
[[pipelines.default.stages]]
name = "research"
max_attempts = 5
pass_score = 0.8
worker = [{python}, {worker}, {counter}]
verifier = [{python}, {verifier}, {scores}, "0.3,0.9"]

[[pipelines.default.stages]]
name = "implement"
gate = true
pass_score = 0
worker = ["true"]
verifier = ["sh", "-c", "echo '{{\\"pass\\": true, \\"score\\": 0.5}}'"]
"""


def _curves_project(folder: Path) -> Project:
    folder.mkdir(parents=True)
    (folder / "worker.py").write_text(CURVE_WORKER)
    (folder / "verifier.py").write_text(VERIFIER)
    stages = CURVE_STAGES.format(
        python=_q(sys.executable),
        worker=_q(str(folder / "worker.py")),
        counter=_q(str(folder / "worker.count")),
        verifier=_q(str(folder / "verifier.py")),
        scores=_q(str(folder / "verifier.count")),
    )
    project = make_project(folder, f"sqlite:///{folder / 'o.db'}", stages)
    assert project.run("db", "upgrade").returncode == 0
    assert project.cli("add", "curve", "--title", "Every attempt shows").exit_code == 0
    tick_until_gate(project, "curve")
    return project


@pytest.mark.parametrize(("width", "height"), [(1366, 768), (390, 844)], ids=["laptop", "phone"])
def test_score_curves_show_every_attempt_at_laptop_and_phone_widths(
    tmp_path: Path, browser: Browser, width: int, height: int
) -> None:
    project = _curves_project(tmp_path / "proj")
    outcomes = project.query("SELECT stage, number, outcome, score FROM attempts ORDER BY id")
    assert [tuple(row) for row in outcomes] == [
        ("research", 1, "worker_error", None),
        ("research", 2, "failed", 0.3),
        ("research", 3, "passed", 0.9),
        ("implement", 1, "passed", 0.5),
    ]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    try:
        with serving(project, page=page) as base:
            page.goto(base + "/task/curve")
            research = page.locator("#stage-curve-research svg.curve")
            unscored = research.locator("path.unscored")
            assert research.locator("circle.score").count() == 2
            assert unscored.count() == 1
            assert unscored.get_attribute("data-attempt") == "1"
            assert "worker_error" in (unscored.locator("title").text_content() or "")
            ticks = research.locator("text.x-tick").all_text_contents()
            assert ticks == ["1", "2", "3"]  # whole attempts, none past the last
            titles = research.locator("text.axis-title").all_text_contents()
            assert titles == ["attempt", "score"]
            legend = research.locator("g.legend").text_content() or ""
            for label in ("passed", "did not pass", "no score", "pass threshold"):
                assert label in legend
            assert research.locator("line.pass-threshold").count() == 1

            implement = page.locator("#stage-curve-implement svg.curve")
            assert implement.locator("circle.score").count() == 1
            assert implement.locator("text.x-tick").all_text_contents() == ["1"]
            assert implement.locator("line.pass-threshold").count() == 0  # pass_score = 0
            assert "pass threshold" not in (implement.locator("g.legend").text_content() or "")
            runs = page.locator("#stage-curve-implement tr.attempt td:nth-child(2)")
            assert runs.all_text_contents() == ["1"]  # its first run, not the task's third

            # The curve fits the screen: no sideways scrolling on a phone.
            box = research.bounding_box()
            assert box is not None and box["x"] + box["width"] <= width
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            # For a person to look at: the page and the curve at this width.
            for folder in (tmp_path, SCREENSHOTS):
                folder.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(folder / f"curves-{width}x{height}.png"), full_page=True)
                research.screenshot(path=str(folder / f"curve-research-{width}.png"))
            print(f"screenshots: {tmp_path} and {SCREENSHOTS}")
    finally:
        context.close()


def test_approve_takes_a_note_and_the_note_box_sits_above_both_buttons(
    gated: Project, page: Page
) -> None:
    with serving(gated, page=page) as base:
        page.goto(base + "/gate/doc")
        note, approve, reject = (
            page.locator(s).bounding_box() for s in ("#note", "#approve", "#reject")
        )
        assert note is not None and approve is not None and reject is not None
        assert note["y"] + note["height"] <= approve["y"]  # the box first, then the buttons
        assert abs(approve["y"] - reject["y"]) < 2 and approve["x"] < reject["x"]  # one row
        page.fill("#note", "Looks right; ship the <i>small</i> fix")
        page.click("#approve")
        assert "Approved" in page.locator("#flash").inner_text()
    assert gated.state("doc") == "research:approved"
    [(note_text,)] = gated.query("SELECT note FROM transitions WHERE event = 'approve'")
    assert note_text == "Looks right; ship the <i>small</i> fix"
    assert "Looks right" in gated.run("show", "doc").stdout


def test_reject_without_a_note_is_refused_on_the_page(gated: Project, page: Page) -> None:
    with serving(gated, page=page) as base:
        page.goto(base + "/gate/doc")
        page.click("#reject")
        flash = page.locator("#flash").inner_text()
        assert "Write a note" in flash and "--note" not in flash
    assert gated.state("doc") == "research:awaiting_approval"


def test_the_gate_of_a_task_not_at_a_gate_says_so_and_links_the_task(
    gated: Project, page: Page
) -> None:
    workspace = gated.dir / "tasks" / "doc"
    (workspace / ".git").write_text("gitdir: /elsewhere/.git/worktrees/doc\n")
    with serving(gated, page=page) as base:
        page.goto(base + "/gate/doc")
        assert ".git" not in page.inner_text("main")  # at the gate: never listed
        assert gated.run("approve", "doc").returncode == 0
        answer = page.goto(base + "/gate/doc")
        assert answer is not None and answer.status == 409
        text = page.inner_text("main")
        assert "doc is not at a gate" in text and "research:approved" in text
        assert "approval hash" not in text and ".git" not in text and "notes.md" not in text
        assert page.locator("#approve").count() == 0
        page.get_by_role("link", name="the task page").click()
        assert page.url == base + "/task/doc"
