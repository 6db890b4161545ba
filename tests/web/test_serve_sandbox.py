"""A sandboxed worker against a real `serve` (issue #35 item 4).

`serve` without a login listens on loopback, and the sandbox shares the
host's network by default: a worker could read a gate page, its CSRF token
and digest, and approve another task's gate as the person who started
`serve`. The worker here, in real bubblewrap under a real tick, tries every
page and every form; each must answer 403, and the other task's gate must
still be waiting, with no approval, halt or cancel recorded.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from support import Project, copy_database
from web_support import _q, gated_project, serving, tick_until_gate

from orchestrator.features.sandbox.bwrap import bwrap_program

pytestmark = pytest.mark.e2e

PYTHON = os.path.realpath(sys.base_prefix)
VENV = os.path.realpath(sys.prefix)

# What a hostile worker does with the pages: read the gate, take its CSRF
# token (cookie and form field) and digest, and post every form it can.
PROBE = """\
import json, re, sys, urllib.error, urllib.request

base = open(sys.argv[1]).read().strip()
seen = {}
cookie = ""

def ask(path, data=None):
    global cookie
    headers = {"Cookie": cookie} if cookie else {}
    request = urllib.request.Request(base + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=20) as answer:
            got = answer.headers.get("Set-Cookie")
            if got:
                cookie = got.split(";")[0]
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""

for path in ("/", "/gate/doc", "/task/doc", "/history", "/metrics", "/static/style.css",
             "/?token=guess", "/task/doc/events"):
    seen[path] = ask(path)[0]
_, page = ask("/gate/doc")
token = re.search(r'name="csrf" value="([^"]+)"', page)
digest = re.search(r'name="expect" value="([^"]+)"', page)
csrf = token.group(1) if token else "none"
expect = digest.group(1) if digest else "none"
form = f"csrf={csrf}&expect={expect}&note=from+the+sandbox".encode()
for path in ("/gate/doc/approve", "/gate/doc/reject", "/task/doc/halt",
             "/task/doc/cancel", "/task/doc/resume"):
    seen["POST " + path] = ask(path, form)[0]
open("probe.json", "w").write(json.dumps(seen))
"""


@pytest.fixture(autouse=True)
def _needs_bwrap() -> None:
    if bwrap_program() is None and not os.environ.get("CI"):
        pytest.skip("bubblewrap (bwrap) is not installed")


def probing_project(folder: Path, template_db: Path) -> Project:
    project = gated_project(folder, copy_database(template_db, folder / "o.db"))
    tools = folder.parent / "probe"  # bound read-only: the project folder may be hidden
    tools.mkdir()
    probe = tools / "probe.py"
    probe.write_text(PROBE)
    ro = ", ".join(_q(p) for p in (PYTHON, VENV, str(tools)))
    with project.config.open("a") as config:
        config.write(
            f"""
[[pipelines.probe.stages]]
name = "probe"
sandbox = "bwrap"
sandbox_ro = [{ro}]
worker = [{_q(sys.executable)}, {_q(str(probe))}, {_q(str(tools / "base.txt"))}]
verifier = ["sh", "-c", "echo '{{\\"pass\\": true, \\"score\\": 1.0}}'"]
"""
        )
    return project


def test_a_sandboxed_worker_reaches_no_page_of_serve(tmp_path: Path, template_db: Path) -> None:
    project = probing_project(tmp_path / "proj", template_db)
    assert project.run("db", "upgrade").returncode == 0
    assert project.cli("add", "doc", "--title", "Write the notes").exit_code == 0
    tick_until_gate(project, "doc")
    with serving(project) as base:
        (tmp_path / "probe" / "base.txt").write_text(base)
        added = project.cli("add", "probe", "--title", "Probe", "--pipeline", "probe")
        assert added.exit_code == 0, added.output
        done = project.run("tick", "--max-tasks", "1", timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads((project.dir / "tasks" / "probe" / "probe.json").read_text())
    assert seen and set(seen.values()) == {403}, seen
    assert project.state("doc") == "research:awaiting_approval"
    events = project.query(
        "SELECT event, actor FROM transitions WHERE task_id = "
        "(SELECT id FROM tasks WHERE slug = 'doc')"
    )
    assert all(event not in ("approve", "reject", "halt", "cancel") for event, _ in events), events
