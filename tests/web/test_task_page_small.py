"""The web's words on a first day, against a real `serve`: a reject with
no note answers in the page's wording (not the CLI's `--note`), and a
landed task's page says so at its top."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from pathlib import Path

from sqlalchemy import create_engine, text
from support import copy_database
from web_support import gated_project, serving, tick_until_gate


def test_a_reject_without_a_note_answers_in_the_pages_words(
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
            found = re.search(r'name="csrf" value="([^"]+)"', answer.read().decode())
        assert found
        host = base.split("://", 1)[1]
        post = urllib.request.Request(
            base + "/gate/doc/reject",
            data=f"csrf={found.group(1)}&note=++".encode(),
            headers={
                "Cookie": cookie,
                **base.headers,
                "Origin": f"http://{host}",
                "Sec-Fetch-Site": "same-origin",
            },
        )
        try:
            urllib.request.urlopen(post, timeout=10).close()
            raise AssertionError("a reject without a note was taken")
        except urllib.error.HTTPError as exc:
            page = exc.read().decode()
            assert exc.code == 409
    flash = re.search(r'id="flash"[^>]*>(.*?)<', page, re.S)
    assert flash is not None, page
    assert "Write a note saying what to change" in flash.group(1)
    assert "--note" not in flash.group(1)
    assert project.state("doc") == "research:awaiting_approval"


def test_a_landed_tasks_page_says_so_at_its_top(tmp_path: Path, template_db: Path) -> None:
    project = gated_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "proj" / "o.db")
    )
    assert project.run("db", "upgrade").returncode == 0
    assert project.cli("add", "doc", "--title", "Doc").exit_code == 0
    engine = create_engine(project.db_url)
    with engine.begin() as conn:  # as a landing records it (`landing/store.record_landed`)
        conn.execute(
            text(
                "UPDATE tasks SET stage = 'complete', status = 'complete', base_branch = 'main', "
                "landed_commit = :c"
            ),
            {"c": "ab" * 20},
        )
    engine.dispose()
    with serving(project) as base:
        ask = urllib.request.Request(base + "/task/doc", headers=base.headers)
        with urllib.request.urlopen(ask, timeout=10) as answer:
            page = answer.read().decode()
    landed = page.index('id="landed"')
    assert landed < page.index("<h2>") and landed < page.index("Timeline")
    assert "landed on main at <code>" + "ab" * 6 + "</code>" in page
