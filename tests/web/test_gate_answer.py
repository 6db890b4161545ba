"""The agent's answer at a gate: the gate page and `show` print the text an
agent CLI said, taken out of its JSON envelope, with the raw capture beside
it. The workers are real processes printing what the CLIs print (compact
JSON, as Claude Code's `--output-format json` and Codex's `exec --json` do;
the shapes are those of tests/agents/test_output.py)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from support import Project, cli_json, copy_database, make_project

from orchestrator.config import load_settings
from orchestrator.storage.db import make_engine
from orchestrator.web.pages import Pages
from orchestrator.web.render import Links

LONG = "x" * 300  # one word longer than any screen
ANSWER = (
    f"## Review\n\nThe pager is **wrong** at the last page.\n\n{LONG}\n\n"
    "<script>alert(1)</script>\n"
)
DRAFT = "draft: still reading"

ENVELOPE_WORKER = """\
import json, sys
answer = sys.argv[1]
envelope = {"type": "result", "subtype": "success", "is_error": False, "duration_ms": 1234,
            "num_turns": 3, "result": answer, "session_id": "efde0f0c-e57a",
            "total_cost_usd": 0.016, "usage": {"input_tokens": 2400, "output_tokens": 160}}
print(json.dumps(envelope, separators=(",", ":")))
"""
JSONL_WORKER = """\
import json, sys
events = [
    {"type": "thread.started", "thread_id": "01a230cc"},
    {"type": "turn.started"},
    {"type": "item.completed",
     "item": {"id": "item_1", "type": "agent_message", "text": sys.argv[2]}},
    {"type": "item.completed",
     "item": {"id": "item_2", "type": "agent_message", "text": sys.argv[1]}},
    {"type": "turn.completed", "usage": {"input_tokens": 2400, "output_tokens": 160}},
]
for event in events:
    print(json.dumps(event, separators=(",", ":")))
"""
PASS = ["sh", "-c", 'echo \'{"pass": true, "score": 1.0}\'']


def answering_project(folder: Path, db_url: str, fmt: str) -> Project:
    """implement -> code_review [gate], whose worker is an agent printing `fmt`."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "agent.py"
    script.write_text(ENVELOPE_WORKER if fmt == "claude-json" else JSONL_WORKER)
    worker = [sys.executable, str(script), ANSWER, DRAFT]
    stages = f"""
[[pipelines.default.stages]]
name = "implement"
worker = ["true"]
verifier = {json.dumps(PASS)}

[[pipelines.default.stages]]
name = "code_review"
gate = true
output = "{fmt}"
worker = {json.dumps(worker)}
verifier = {json.dumps(PASS)}
"""
    project = make_project(folder, db_url, stages)
    assert project.run("db", "upgrade").returncode == 0
    assert project.cli("add", "pager", "--title", "Page the results").exit_code == 0
    for _ in range(4):
        assert project.run("tick").returncode == 0
        if project.state("pager") == "code_review:awaiting_approval":
            return project
    raise AssertionError(f"never reached the review gate: {project.state('pager')}")


def gate_html(project: Project) -> str:
    settings = load_settings(config=project.config, db_url=project.db_url)
    engine = make_engine(project.db_url)
    try:
        html, _status = Pages(engine, settings).gate(Links(), "pager", csrf="token")
        return html
    finally:
        engine.dispose()


@pytest.mark.parametrize("fmt", ["claude-json", "codex-jsonl"])
def test_gate_page_shows_the_answer_not_the_envelope(
    tmp_path: Path, fmt: str, template_db: Path
) -> None:
    project = answering_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "o.db"), fmt
    )
    html = gate_html(project)
    shown = re.search(r'<div class="markdown answer" id="answer">(.*?)</div>', html, re.S)
    assert shown is not None, html
    answer = shown.group(1)
    assert "<h2>Review</h2>" in answer and "<strong>wrong</strong>" in answer  # Markdown
    assert LONG in answer
    assert "&lt;script&gt;" in answer and "<script>" not in answer  # escaped, never run
    assert '"type"' not in answer and "&#34;type&#34;" not in answer  # no JSON in it
    assert DRAFT not in answer  # Codex: the last agent message, not an earlier one
    raw = re.search(r'<details id="answer-raw">(.*?)</details>', html, re.S)
    assert raw is not None and "&#34;type&#34;:" in raw.group(1)  # the capture, one click away


@pytest.mark.parametrize("fmt", ["claude-json", "codex-jsonl"])
def test_show_prints_the_answer_wrapped(tmp_path: Path, fmt: str, template_db: Path) -> None:
    project = answering_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "o.db"), fmt
    )
    done = project.run("show", "pager", extra_env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    section = done.stdout.split("\nanswer (", 1)[1].split("\ntransitions:", 1)[0]
    lines = section.splitlines()
    assert "    ## Review" in lines and "    The pager is **wrong** at the last page." in lines
    head = done.stdout.split("\ntransitions:", 1)[0].splitlines()
    assert all(len(line) <= 80 for line in head), head  # wrapped, not cut at the edge
    assert "".join(line.strip() for line in lines if line.strip().startswith("x")) == LONG
    assert '"type"' not in section and DRAFT not in section
    assert cli_json(project.cli("show", "pager", "--json"))["answer"] == ANSWER


def test_plain_output_is_the_answer_as_it_is(tmp_path: Path, template_db: Path) -> None:
    project = answering_project(
        tmp_path / "proj", copy_database(template_db, tmp_path / "o.db"), "text"
    )
    answer = cli_json(project.cli("show", "pager", "--json"))["answer"]
    assert answer.startswith('{"type":"thread.started"')  # text is not parsed
