"""Helpers for the web tests: a gated project, a real `serve` process, Chromium.

`serve` runs as its own process on a free port; tests wait until /healthz
answers (polling, never a fixed sleep). Chromium is Debian's system browser
driven by Playwright through `executable_path`: nothing is downloaded.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support import Project, make_project

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "web"

# A gated first stage whose worker writes the hint it got into the workspace
# and whose verifier scores by attempt: 0.2, 0.5, then a pass at 0.8.
VERIFIER = """\
import json, pathlib, sys
counter = pathlib.Path(sys.argv[1])
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
scores = [float(s) for s in sys.argv[2].split(",")]
score = scores[min(n, len(scores)) - 1]
print(json.dumps({"pass": score >= 0.8, "score": score,
                  "reasons": [f"attempt {n} scored {score}"], "next_hint": "try harder"}))
"""
WORKER = """\
import os, pathlib
hint = os.environ.get("ORCHESTRATOR_NEXT_HINT", "")
pathlib.Path("notes.md").write_text(f"# Notes\\n\\nhint: {hint}\\n")
"""


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("chromium is not installed, and CI=true forbids skipping the browser tests")
    pytest.skip("the browser tests need Debian's chromium (apt-get install chromium)")


def gated_project(folder: Path, db_url: str, scores: str = "0.9") -> Project:
    script = folder / "verifier.py"
    folder.mkdir(parents=True, exist_ok=True)
    script.write_text(VERIFIER)
    worker = folder / "worker.py"
    worker.write_text(WORKER)
    counter = folder / "verifier.count"
    stages = f"""
[[pipelines.default.stages]]
name = "research"
gate = true
max_attempts = 5
pass_score = 0.8
plateau = {{ patience = 3, min_delta = 0.01 }}
worker = [{_q(sys.executable)}, {_q(str(worker))}]
verifier = [{_q(sys.executable)}, {_q(str(script))}, {_q(str(counter))}, "{scores}"]

[[pipelines.default.stages]]
name = "implement"
worker = ["true"]
verifier = ["sh", "-c", "echo '{{\\"pass\\": true, \\"score\\": 1.0}}'"]
"""
    return make_project(folder, db_url, stages)


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def tick_until_gate(project: Project, slug: str, ticks: int = 6) -> None:
    """Tick (real processes) until `slug` waits at its gate."""
    for _ in range(ticks):
        done = project.run("tick")
        assert done.returncode == 0, done.stderr
        if project.state(slug).endswith(":awaiting_approval"):
            return
    raise AssertionError(f"{slug} never reached its gate: {project.state(slug)}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(base: str, process: subprocess.Popen[str], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            out, err = process.communicate()
            raise AssertionError(f"serve exited {process.returncode}: {out}{err}")
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)  # polling /healthz, not waiting a fixed time
    raise AssertionError(f"serve did not answer {base}/healthz within {timeout} s")


class Served(str):
    """A `serve`'s base URL, with the access token it printed (None with a login)."""

    token: str | None = None

    @property
    def headers(self) -> dict[str, str]:
        """What a script sends to be let in (the token as a Bearer)."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


@contextmanager
def serving(project: Project, *args: str, page: Any = None) -> Iterator[Served]:
    """A real `orchestrator serve` process; yields its base URL. Given a
    Playwright `page`, its browser gets the access token's cookie first."""
    port = free_port()
    process = project.popen("serve", "--port", str(port), *args)
    base = Served(f"http://127.0.0.1:{port}")
    try:
        wait_healthy(base, process)
        assert process.stdout is not None
        printed = process.stdout.readline()  # "serving on <address> (Ctrl-C stops)"
        found = re.search(r"\?token=([A-Za-z0-9_-]+)", printed)
        base.token = found.group(1) if found else None
        if page is not None and base.token:
            cookie = {"name": f"orch_access_{port}", "value": base.token, "url": base}
            page.context.add_cookies([cookie])
        yield base
    finally:
        process.terminate()
        try:
            process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def screenshot_path(request: pytest.FixtureRequest) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    name = request.node.name.replace("/", "_").replace("[", "-").replace("]", "")
    return SCREENSHOTS / f"{name}.png"
