"""Issue 22, item 16, the web's part: a signed-in name the history cannot
hold (NUL, past 200 characters) is refused, not a 500 from PostgreSQL; and
`serve --host 127.0.0.2`, accepted as loopback, answers there."""

from __future__ import annotations

import base64
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from support import copy_database
from web_support import free_port, gated_project, serving, tick_until_gate

TOKEN = "a-long-shared-token-0123456789"


def status(request: urllib.request.Request) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as exc:
        body = exc.read().decode()
        exc.close()
        return exc.code, body


@pytest.mark.pg
def test_a_web_name_with_nul_or_too_long_is_refused_on_postgresql(
    tmp_path: Path, pg_url: str
) -> None:
    project = gated_project(tmp_path / "proj", pg_url)
    assert project.run("db", "upgrade").returncode == 0
    assert project.cli("add", "doc", "--title", "Doc").exit_code == 0
    tick_until_gate(project, "doc")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    with serving(project, "--token-file", str(token_file)) as base:
        good = base64.b64encode(f"frank:{TOKEN}".encode()).decode()
        code, page = status(
            urllib.request.Request(base + "/gate/doc", headers={"Authorization": f"Basic {good}"})
        )
        assert code == 200
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)
        digest = re.search(r'name="expect" value="([^"]+)"', page)
        assert csrf and digest
        form = f"csrf={csrf.group(1)}&expect={digest.group(1)}".encode()
        cookie = f"orch_csrf={csrf.group(1)}"
        for name in ("fr\x00ank", "x" * 201, "bell\x07"):
            basic = base64.b64encode(f"{name}:{TOKEN}".encode()).decode()
            auth = {"Authorization": f"Basic {basic}", "Cookie": cookie}
            assert status(urllib.request.Request(base + "/gate/doc", headers=auth))[0] == 401
            post = urllib.request.Request(base + "/gate/doc/approve", data=form, headers=auth)
            assert status(post)[0] == 401, name
        assert project.state("doc") == "research:awaiting_approval"
        post = urllib.request.Request(
            base + "/gate/doc/approve",
            data=form,
            headers={"Authorization": f"Basic {good}", "Cookie": cookie},
        )
        assert status(post)[0] == 200
    assert project.query("SELECT actor FROM transitions WHERE event = 'approve'") == [("frank",)]


def test_serve_on_another_loopback_address_answers_there(tmp_path: Path, template_db: Path) -> None:
    project = gated_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db")
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.cli("add", "doc", "--title", "Doc").exit_code == 0
    port = free_port()
    process = project.popen("serve", "--host", "127.0.0.2", "--port", str(port))
    base = f"http://127.0.0.2:{port}"
    try:
        assert _wait_up(base, process) == 200
        token = (project.dir / "state" / "web-token").read_text().strip()
        bearer = {"Authorization": f"Bearer {token}"}
        assert status(urllib.request.Request(base + "/"))[0] == 403  # no token, no page
        code, page = status(urllib.request.Request(base + "/", headers=bearer))
        assert code == 200 and "doc" in page
        # Still no DNS rebinding: a name that is not a loopback literal gets nothing.
        code, _ = status(urllib.request.Request(base + "/", headers={"Host": "evil.example"}))
        assert code == 421
    finally:
        process.terminate()
        try:
            process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def _wait_up(base: str, process: subprocess.Popen[str]) -> int:
    """Poll /healthz until serve answers (any status), or fail when it exits."""
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            out, err = process.communicate()
            raise AssertionError(f"serve exited {process.returncode}: {out}{err}")
        try:
            return status(urllib.request.Request(base + "/healthz"))[0]
        except (urllib.error.URLError, OSError):
            time.sleep(0.05)  # polling until it listens, not a fixed wait
    raise AssertionError("serve did not answer")
