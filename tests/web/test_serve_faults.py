"""A real `serve` process under a signal and under a race of approvals
(issue 22, item 14)."""

from __future__ import annotations

import html
import re
import signal
import urllib.error
import urllib.request
from pathlib import Path

from support import copy_database
from web_support import free_port, gated_project, serving, tick_until_gate, wait_healthy


def test_serve_shuts_down_on_sigterm_and_exits_0(tmp_path: Path, template_db: Path) -> None:
    """SIGTERM is how service managers stop a server: it must shut down and
    exit 0, not die by the signal (which they report as a failure)."""
    project = gated_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db")
    )
    assert project.run("db", "upgrade").returncode == 0
    port = free_port()
    process = project.popen("serve", "--port", str(port))
    try:
        wait_healthy(f"http://127.0.0.1:{port}", process)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, (process.returncode, out, err)
    assert "Traceback" not in err, err


def test_an_approval_that_lost_the_race_says_who_approved(
    tmp_path: Path, template_db: Path
) -> None:
    """The page is loaded, someone else approves (the CLI, as alice), then
    the stale form is posted: the answer names alice, never "Approved"."""
    project = gated_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db")
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.cli("add", "doc", "--title", "Doc").exit_code == 0
    tick_until_gate(project, "doc")
    with serving(project) as base:
        ask = urllib.request.Request(base + "/gate/doc", headers=base.headers)
        with urllib.request.urlopen(ask, timeout=10) as answer:
            cookie = answer.headers["Set-Cookie"].split(";")[0]
            page = answer.read().decode()
        token = re.search(r'name="csrf" value="([^"]+)"', page)
        digest = re.search(r'name="expect" value="([^"]+)"', page)
        assert token and digest
        won = project.run("approve", "doc", "--by", "alice")
        assert won.returncode == 0, won.stderr
        form = f"csrf={token.group(1)}&expect={digest.group(1)}".encode()
        post = urllib.request.Request(
            base + "/gate/doc/approve", data=form, headers={"Cookie": cookie, **base.headers}
        )
        try:
            with urllib.request.urlopen(post, timeout=10) as answer:
                status, body = answer.status, answer.read().decode()
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read().decode()
    shown = html.unescape(body)
    assert "Approved: the next tick" not in shown, shown
    assert "already approved by alice" in shown, (status, shown)
    assert status == 409, status
    assert project.query("SELECT actor FROM transitions WHERE event = 'approve'") == [("alice",)]
