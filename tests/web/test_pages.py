"""The board's paging and the history filters, on both backends; token sign-in
against a real `serve` process."""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.request
from pathlib import Path

from sqlalchemy import Engine
from support import Project, copy_database
from web_support import gated_project, serving, tick_until_gate

from orchestrator.config import load_settings
from orchestrator.storage.db import make_engine
from orchestrator.web import data
from orchestrator.web.pages import Pages
from orchestrator.web.render import Links


def _engine(project: Project) -> Engine:
    return make_engine(project.db_url)


def _seed(project: Project, count: int) -> None:
    specs = ({"slug": f"t-{i:03d}", "title": f"task {i}"} for i in range(count))
    lines = "\n".join(json.dumps(spec) for spec in specs)
    assert project.cli("add", "--from", "-", input=lines).exit_code == 0
    # Every fifth task waits at a gate; the ones added later have waited longer.
    from sqlalchemy import create_engine, text

    engine = create_engine(project.db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE tasks SET status = 'awaiting_approval' WHERE id % 5 = 0"))
        rows = conn.execute(text("SELECT id FROM tasks WHERE id % 5 = 0 ORDER BY id")).all()
        for n, (task_id,) in enumerate(rows):
            conn.execute(
                text("UPDATE tasks SET updated_at = :at WHERE id = :id"),
                {"at": f"2026-01-01 00:{59 - n:02d}:00", "id": task_id},
            )
    engine.dispose()


def test_board_pages_cover_every_task_once_approvals_first(project: Project) -> None:
    _seed(project, 130)
    engine = _engine(project)
    try:
        seen: list[tuple[str, str]] = []
        cursor: str | None = None
        pages = 0
        while True:
            board = data.board(engine, 40, None, cursor)
            pages += 1
            assert sum(len(s.rows) for s in board.sections) <= 40
            seen += [(s.status, r["slug"]) for s in board.sections for r in s.rows]
            if board.next_cursor is None:
                break
            cursor = board.next_cursor
        counts = dict(data.board(engine, 40).counts)
    finally:
        engine.dispose()
    assert pages == 4
    slugs = [slug for _, slug in seen]
    assert sorted(slugs) == sorted(f"t-{i:03d}" for i in range(130))  # each exactly once
    statuses = [status for status, _ in seen]
    assert statuses[:26] == ["awaiting_approval"] * 26  # the queue first
    assert counts["awaiting_approval"] == 26 and counts["ready"] == 104
    waiting = [slug for status, slug in seen if status == "awaiting_approval"]
    # Oldest waiting first: the task updated longest ago (id 130, slug t-129) leads.
    assert waiting == [f"t-{task_id - 1:03d}" for task_id in range(130, 0, -5)]


def test_history_filters_by_task_event_and_actor(project: Project) -> None:
    assert project.cli("add", "a", "--title", "A").exit_code == 0
    assert project.cli("add", "b", "--title", "B").exit_code == 0
    assert project.cli("halt", "a", "--by", "dana").exit_code == 0
    assert project.cli("halt", "b", "--by", "erin").exit_code == 0
    settings = load_settings(config=str(project.config), db_url=project.db_url)
    engine = _engine(project)
    try:
        rows = data.history_page(engine, actor="dana").rows
        assert [(r["task"], r["event"]) for r in rows] == [("a", "halt")]
        rows = data.history_page(engine, event="add").rows
        assert [r["task"] for r in rows] == ["b", "a"]  # newest first
        rows = data.history_page(engine, task="b", event="halt").rows
        assert [r["actor"] for r in rows] == ["erin"]
        html = Pages(engine, settings).history(Links(), {"actor": "erin"})
    finally:
        engine.dispose()
    assert "erin" in html and "dana" not in html


def test_token_sign_in_names_the_actor(tmp_path: Path, template_db: Path) -> None:
    project = gated_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db")
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.cli("add", "doc", "--title", "Doc").exit_code == 0
    tick_until_gate(project, "doc")
    token_file = tmp_path / "token"
    token_file.write_text("a-long-shared-token-0123456789\n")
    with serving(project, "--host", "127.0.0.1", "--token-file", str(token_file)) as base:
        try:
            urllib.request.urlopen(base + "/gate/doc", timeout=10)
            raise AssertionError("the gate page answered without a token")
        except urllib.error.HTTPError as exc:
            assert exc.code == 401
            assert "Basic" in exc.headers["WWW-Authenticate"]
        basic = base64.b64encode(b"frank:a-long-shared-token-0123456789").decode()
        signed = {"Authorization": f"Basic {basic}"}
        ask = urllib.request.Request(base + "/gate/doc", headers=signed)
        with urllib.request.urlopen(ask, timeout=10) as answer:
            cookie = answer.headers["Set-Cookie"].split(";")[0]
            page = answer.read().decode()
        token = re.search(r'name="csrf" value="([^"]+)"', page)
        digest = re.search(r'name="expect" value="([^"]+)"', page)
        assert token and digest and cookie.endswith(token.group(1))
        form = f"csrf={token.group(1)}&expect={digest.group(1)}".encode()
        post = urllib.request.Request(
            base + "/gate/doc/approve",
            data=form,
            headers={"Authorization": f"Basic {basic}", "Cookie": cookie},
        )
        with urllib.request.urlopen(post, timeout=10) as answer:
            assert answer.status == 200  # after the 303 to the task page
    assert project.query("SELECT actor FROM transitions WHERE event = 'approve'") == [("frank",)]


def test_loopback_without_auth_answers_only_to_loopback_names(
    tmp_path: Path, template_db: Path
) -> None:
    """DNS rebinding: a page at evil.example resolving to 127.0.0.1 gets nothing."""
    project = gated_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db")
    )
    assert project.run("db", "upgrade").returncode == 0
    with serving(project) as base:
        port = base.rsplit(":", 1)[1]
        for host, status in (("evil.example", 421), (f"evil.example:{port}", 421)):
            ask = urllib.request.Request(base + "/", headers={"Host": host})
            try:
                urllib.request.urlopen(ask, timeout=10)
                raise AssertionError(f"answered Host {host}")
            except urllib.error.HTTPError as exc:
                assert exc.code == status
        for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
            ask = urllib.request.Request(base + "/", headers={"Host": host, **base.headers})
            with urllib.request.urlopen(ask, timeout=10) as answer:
                assert answer.status == 200


def test_the_shared_token_cannot_sign_in_as_a_users_file_user(
    project: Project, tmp_path: Path
) -> None:
    # review finding: Auth.actor accepts Basic `ANY-NAME:TOKEN` and returns
    # ANY-NAME as the actor; with --users and a token both configured, whoever
    # holds the shared token approves in the history as "alice" (a user with a
    # password of her own they do not know). The token's actor should be fixed
    # (e.g. "token") or at least never a name from the users file.
    from orchestrator.web.security import hash_password

    project = gated_project(tmp_path / "gp", project.db_url)
    assert project.cli("add", "doc", "--title", "Doc").exit_code == 0
    tick_until_gate(project, "doc")
    users = tmp_path / "users"
    users.write_text(f"alice:{hash_password('alice-own-password')}\n")
    token_file = tmp_path / "token"
    token_file.write_text("a-long-shared-token-0123456789\n")
    # Corrected: the original read the gate as alice:TOKEN and expected a
    # page; the fix refuses that sign-in outright (401), which is the stronger
    # outcome the finding asks for. Another name with the token still works.
    with serving(project, "--users", str(users), "--token-file", str(token_file)) as base:

        def get(credentials: bytes) -> int:
            basic = base64.b64encode(credentials).decode()
            ask = urllib.request.Request(
                base + "/gate/doc", headers={"Authorization": f"Basic {basic}"}
            )
            try:
                with urllib.request.urlopen(ask, timeout=10) as answer:
                    return int(answer.status)
            except urllib.error.HTTPError as exc:
                exc.close()
                return exc.code

        assert get(b"alice:a-long-shared-token-0123456789") == 401
        assert get(b"bob:a-long-shared-token-0123456789") == 200
        assert get(b"alice:alice-own-password") == 200
    assert project.query("SELECT actor FROM transitions WHERE event = 'approve'") != [("alice",)]


def test_a_malformed_board_cursor_is_the_first_page_not_a_500(
    tmp_path: Path, template_db: Path
) -> None:
    # review finding: data.parse_cursor checks `offset.isdigit()`, which is true
    # for "²" (int() then raises) and for a 5000-digit number (over Python's
    # int-string limit); a crafted `?from=` answers 500 instead of the first page.
    project = gated_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db")
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.cli("add", "doc", "--title", "Doc").exit_code == 0
    with serving(project) as base:
        for cursor in ("ready:%C2%B2", "ready:" + "9" * 5000):
            ask = urllib.request.Request(f"{base}/?from={cursor}", headers=base.headers)
            with urllib.request.urlopen(ask, timeout=10) as answer:
                assert answer.status == 200


def test_a_non_ascii_credential_is_a_401_not_a_500(tmp_path: Path, template_db: Path) -> None:
    # review finding: Auth.actor feeds the raw header to hmac.compare_digest,
    # which raises TypeError on non-ASCII str: `Authorization: Bearer é` (or a
    # Basic password with an accent, or a non-ASCII csrf field in csrf_ok)
    # answers 500 instead of 401/403. Compare bytes (.encode()).
    project = gated_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db")
    )
    assert project.run("db", "upgrade").returncode == 0
    token_file = tmp_path / "token"
    token_file.write_text("a-long-shared-token-0123456789\n")
    with serving(project, "--token-file", str(token_file)) as base:
        basic = base64.b64encode("frank:mot-de-passe-é".encode()).decode()
        for header in ("Bearer \u00e9t\u00e9", f"Basic {basic}"):
            ask = urllib.request.Request(base + "/", headers={"Authorization": header})
            try:
                urllib.request.urlopen(ask, timeout=10).close()
                raise AssertionError("answered a wrong credential")
            except urllib.error.HTTPError as exc:
                assert exc.code == 401, (header, exc.code)


def test_a_post_is_judged_by_its_signed_token_and_its_origin(
    tmp_path: Path, template_db: Path
) -> None:
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
        found = re.search(r'name="csrf" value="([^"]+)"', page)
        assert found
        token = found.group(1)
        forged = "A" * 24 + "." + "0" * 64

        def post(csrf: str, cookie: str, **headers: str) -> int:
            ask = urllib.request.Request(
                base + "/gate/doc/reject",
                data=f"csrf={csrf}&note=why".encode(),
                headers={"Cookie": cookie, **base.headers, **headers},
            )
            try:
                with urllib.request.urlopen(ask, timeout=10) as answer:
                    return int(answer.status)
            except urllib.error.HTTPError as exc:
                exc.close()
                return exc.code

        host = base.split("://", 1)[1]
        assert post(forged, f"orch_csrf={forged}") == 403  # a cookie we never signed
        assert post(token, cookie, **{"Sec-Fetch-Site": "same-site"}) == 403
        assert post(token, cookie, Origin="null") == 403
        assert post(token, cookie, Origin="http://127.0.0.1:1") == 403
        assert project.state("doc") == "research:awaiting_approval"
        same = {"Origin": f"http://{host}", "Sec-Fetch-Site": "same-origin"}
        assert post(token, cookie, **same) == 200  # 303 to the task page, followed
    notes = project.query("SELECT note FROM transitions WHERE event = 'reject'")
    assert notes == [("why",)]


def test_the_board_says_when_the_last_tick_ran_idle_ones_included(
    tmp_path: Path, template_db: Path
) -> None:
    project = gated_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db")
    )
    assert project.run("db", "upgrade").returncode == 0
    engine = _engine(project)
    pages = Pages(engine, load_settings(config=project.config))
    try:
        assert ">no tick yet<" in pages.board(Links()).replace(" · ", "")
        assert project.run("tick").returncode == 0  # idle: nothing to do
        board = pages.board(Links())
        assert re.search(r'id="last-tick"> · last tick \d+ s ago<', board), board
    finally:
        engine.dispose()


def test_loopback_without_login_asks_for_the_printed_token(
    tmp_path: Path, template_db: Path
) -> None:
    """The address `serve` prints is traded for a cookie; nothing else gets a page."""
    project = gated_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db")
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.cli("add", "doc", "--title", "Doc").exit_code == 0

    class Stay(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None  # look at the 303 itself

    opener = urllib.request.build_opener(Stay)

    def get(path: str, **headers: str) -> tuple[int, dict[str, str]]:
        try:
            with opener.open(urllib.request.Request(base + path, headers=headers)) as answer:
                return answer.status, dict(answer.headers)
        except urllib.error.HTTPError as exc:
            exc.close()
            return exc.code, dict(exc.headers)

    with serving(project) as base:
        kept = project.dir / "state" / "web-token"
        assert base.token and kept.read_text().strip() == base.token
        assert kept.stat().st_mode & 0o777 == 0o600
        port = base.rsplit(":", 1)[1]
        assert get("/")[0] == 403
        assert get("/task/doc?token=" + "x" * 43)[0] == 403
        assert get("/task/doc", Cookie=f"orch_access_{port}={'x' * 43}")[0] == 403
        code, headers = get(f"/task/doc?token={base.token}&x=1")
        assert code == 303 and headers["location"] == "/task/doc?x=1"
        # A path that starts `//` stays on this server (not a redirect off-site).
        code, headers = get(f"//evil.example/?token={base.token}")
        assert code == 303 and headers["location"] == "/evil.example/"
        cookie = headers["set-cookie"].split(";")[0]
        assert cookie == f"orch_access_{port}={base.token}"
        assert "HttpOnly" in headers["set-cookie"]
        assert get("/task/doc", Cookie=cookie)[0] == 200
    with serving(project) as again:  # a restart keeps the address
        assert again.token == base.token
