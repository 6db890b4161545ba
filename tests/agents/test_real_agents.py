"""Each recipe of `orchestrator init --agent` run through real `orchestrator
tick` processes with the REAL agent CLI (Claude Code 2.1.197, Codex CLI
0.171.0, aider 0.86.2, the script agent) against the scripted model server.

At every stage the model first edits a file with the agent's own tool (Claude
`Write`, Codex `apply_patch` through `exec_command`, aider and the script
agent a SEARCH/REPLACE block), then ends with a fenced json verdict. The
test checks that the edit landed in the task's workspace, that the verdict
was read (the task moves on, gates wait for `approve`), and what the
attempts recorded of their usage. Each agent runs with HOME in the test's
folder, telemetry off, and no retries.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from stub_model import Script, StubModel

pytestmark = pytest.mark.e2e

SECRET = "sk-stub-secret-0123"
PROSE = " ".join(["the plan says what changes and how the tests prove it"] * 4)
RESEARCH = f"## Scope\n{PROSE}\n## Plan\n{PROSE}\n## Risks\n{PROSE}\n"
STAGES = (
    ("research", "RESEARCH.md", RESEARCH, True),
    ("implement", "test_feature.py", "def test_feature():\n    assert 1 + 1 == 2\n", False),
    ("code_review", "REVIEW_NOTE.md", "review\n", True),
    ("bug_find", "test_bug.py", "def test_bug():\n    assert 'a' < 'b'\n", False),
    (
        "adversarial_bug_find",
        "test_hostile.py",
        "def test_hostile():\n    assert [] == []\n",
        False,
    ),
    ("doc_review", "DOCS.md", "documented\n", False),
    ("referee", "REFEREE_NOTE.md", "judged\n", False),
)
# Stages whose agent may not edit (reviews and the judge).
READ_ONLY = {"code_review", "referee"}
# Stages whose verdict the agent prints (no judge script).
AGENT_VERDICT = {"code_review", "doc_review", "referee"}


class AgentProject:
    """A project made by `orchestrator init --agent NAME`, driven by real processes."""

    def __init__(
        self,
        root: Path,
        agent: str,
        program_dir: Path,
        stub: StubModel,
        repository: Path | None = None,
        init_args: tuple[str, ...] = (),
        home: Path | None = None,
        sandbox: bool = False,
    ) -> None:
        self.dir = root / "project"
        self.dir.mkdir()
        self.home = root / "home" if home is None else home
        self.home.mkdir(exist_ok=True)
        self.stub = stub
        self.env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("ORCHESTRATOR_", "ANTHROPIC_", "OPENAI_", "CODEX_", "AIDER_"))
        }
        self.env.update(
            HOME=str(self.home),
            PATH=f"{program_dir}{os.pathsep}{os.environ['PATH']}",
            DISABLE_TELEMETRY="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            CLAUDE_CODE_MAX_RETRIES="0",
            DISABLE_AUTOUPDATER="1",
            ANTHROPIC_BASE_URL=stub.url,
            ANTHROPIC_API_KEY=SECRET,
            OPENAI_API_KEY=SECRET,
            NO_COLOR="1",
        )
        self.run(
            "init",
            "--agent",
            agent,
            *(["--repository", str(repository)] if repository else []),
            *init_args,
            *(["--sandbox"] if sandbox else []),
        )
        config = self.dir / "orchestrator.toml"
        text = config.read_text()
        # What a user does first: the judges run the project's own Python.
        text = text.replace('"--python", "python3"', f'"--python", {json.dumps(sys.executable)}')
        text = text.replace("retry_interval = 60", "retry_interval = 0")
        config.write_text(text)

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(  # noqa: PLW1510 - the caller checks returncode
            [sys.executable, "-m", "orchestrator", *args],
            cwd=self.dir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
        return done

    def tick(self) -> str:
        return self.run("tick", "--max-tasks", "1").stdout

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.dir / "orchestrator.db") as conn:
            return conn.execute(sql, params).fetchall()

    def state(self, slug: str) -> tuple[str, str, str | None]:
        rows = self.query("SELECT stage, status, halt_reason FROM tasks WHERE slug = ?", slug)
        return rows[0]

    def attempts(self, slug: str) -> list[dict[str, Any]]:
        cursor = sqlite3.connect(self.dir / "orchestrator.db")
        cursor.row_factory = sqlite3.Row
        try:
            rows = cursor.execute(
                "SELECT a.* FROM attempts a JOIN tasks t ON t.id = a.task_id "
                "WHERE t.slug = ? ORDER BY a.id",
                (slug,),
            ).fetchall()
            return [dict(row) for row in rows]
        finally:
            cursor.close()


@pytest.fixture
def home_outside_tmp() -> Iterator[Path]:
    """A home outside the temporary folder (/var/tmp is not Codex's temp dir)."""
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() else Path.home()
    folder = Path(tempfile.mkdtemp(prefix="orch-agent-home-", dir=base))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_pipeline(project: AgentProject) -> list[dict[str, Any]]:
    """Take one task through all seven stages; return its attempts."""
    project.run("add", "t1", "--title", "Add a feature", "--body", "Make it so.")
    workspace = project.dir / "tasks" / "t1"
    for stage, file_name, content, gate in STAGES:
        project.stub.script = Script(
            file_name=file_name,
            content=content,
            final=f'Stage {stage} done.\n\n```json\n{{"pass": true, "score": 0.9, '
            f'"reasons": ["{stage} ok"], "next_hint": ""}}\n```\n',
        )
        out = project.tick()  # after a gate: moves the approved task on, then runs it
        assert f"{stage} attempt 1 passed" in out, out
        if stage not in READ_ONLY:
            assert (workspace / file_name).read_text() == content, stage
        if gate:
            assert project.state("t1")[:2] == (stage, "awaiting_approval")
            project.run("approve", "t1")
    assert project.state("t1")[:2] == ("complete", "complete")
    attempts = project.attempts("t1")
    assert [a["stage"] for a in attempts] == [stage for stage, *_ in STAGES]
    assert {a["outcome"] for a in attempts} == {"passed"}
    return attempts


def test_claude_code_recipe_through_real_ticks(
    tmp_path: Path, claude_bin: Path, stub: StubModel
) -> None:
    project = AgentProject(tmp_path, "claude", claude_bin.parent, stub)
    attempts = run_pipeline(project)
    for attempt in attempts:
        # Cost, tokens, turns and the session come from the json envelope.
        envelope_file = "verifier.out" if attempt["stage"] == "referee" else "worker.out"
        folder = project.dir / "state" / "t1" / f"{attempt['stage']}-001"
        envelope = json.loads((folder / envelope_file).read_text())
        assert envelope["type"] == "result"
        assert attempt["cost_usd"] == pytest.approx(envelope["total_cost_usd"])
        assert attempt["cost_usd"] > 0
        assert attempt["session_id"] == envelope["session_id"]
        assert attempt["turns"] == envelope["num_turns"] >= 2
        assert attempt["input_tokens"] >= envelope["usage"]["input_tokens"] > 0
        assert attempt["output_tokens"] == envelope["usage"]["output_tokens"]
        if attempt["stage"] in AGENT_VERDICT:  # read from the final message, not the envelope
            assert attempt["reasons"] == json.dumps([f"{attempt['stage']} ok"])
    # The key reached Claude Code (its stages name it in `secrets`).
    posts = [b for b in stub.posts("/v1/messages") if b.get("tools")]
    assert len(posts) >= 2 * len(STAGES)
    assert {h.get("x-api-key") for h in stub.headers} == {SECRET}
    total = project.query("SELECT sum(cost_usd) FROM costs WHERE task = 't1'")[0][0]
    assert total == pytest.approx(sum(a["cost_usd"] for a in attempts))
    shown = project.run("show", "t1").stdout
    assert f"${total:.4f}" in shown
    listed = json.loads(project.run("list", "--json").stdout)
    assert listed[0]["cost_usd"] == pytest.approx(total)


def test_claude_code_budget_halts_and_resume_raises_it(
    tmp_path: Path, claude_bin: Path, stub: StubModel
) -> None:
    project = AgentProject(tmp_path, "claude", claude_bin.parent, stub)
    stub.script = Script(file_name="RESEARCH.md", content=RESEARCH)
    project.run("add", "t1", "--title", "Costly", "--budget", "0.02")
    assert "research attempt 1 passed" in project.tick()
    project.run("approve", "t1")
    stub.script = Script(file_name="test_a.py", content="def test_a():\n    pass\n")
    assert "implement attempt 1 passed" in project.tick()
    spent = project.query("SELECT sum(cost_usd) FROM attempts")[0][0]
    assert spent >= 0.02  # two attempts of $0.016 (Claude Code's own price table)
    out = project.tick()
    assert "halted (budget" in out
    assert project.state("t1") == ("code_review", "halted", "budget")
    assert len(project.attempts("t1")) == 2  # halted before a third was claimed
    refused = subprocess.run(  # noqa: PLW1510 - the caller checks returncode
        [sys.executable, "-m", "orchestrator", "resume", "t1", "--budget", "0.01"],
        cwd=project.dir,
        env=project.env,
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 1 and "not above" in refused.stderr
    project.run("resume", "t1", "--budget", "1")
    assert project.state("t1") == ("code_review", "ready", None)
    stub.script = Script(file_name="R.md", content="r\n")
    assert "code_review attempt 1 passed" in project.tick()


def test_claude_code_adds_a_subtask_through_orchestrator_mcp(
    tmp_path: Path, claude_bin: Path, stub: StubModel
) -> None:
    """Claude Code is the MCP client of `orchestrator mcp` (init --mcp): the
    scripted model calls `add_subtask`, then asks for `approve`, which the
    server does not have; the subtask waits on nothing and runs next tick."""
    project = AgentProject(tmp_path, "claude", claude_bin.parent, stub, init_args=("--mcp",))
    assert (
        '"--mcp-config", "{config_dir}/mcp.json"' in (project.dir / "orchestrator.toml").read_text()
    )
    project.run("add", "t1", "--title", "A big change", "--body", "Split it up.")
    stub.script = Script(
        file_name="RESEARCH.md",
        content=RESEARCH,
        tool_calls=(
            # Claude Code connects MCP servers in the background; a model
            # waits for them with this tool before it calls theirs.
            ("WaitForMcpServers", {}),
            ("mcp__orchestrator__add_subtask", {"title": "Document it", "slug": "t1-docs"}),
            ("mcp__orchestrator__approve", {"slug": "t1"}),
        ),
    )
    out = project.tick()
    assert "research attempt 1 passed" in out, out
    offered = {
        tool["name"]
        for body in stub.posts("/v1/messages")
        for tool in body.get("tools") or []
        if tool["name"].startswith("mcp__orchestrator__")
    }
    assert offered == {
        f"mcp__orchestrator__{name}"
        for name in ("list_tasks", "show_task", "task_history", "explain", "add_subtask")
    }
    results = [r for r in stub.tool_results() if "ready: false" not in json.dumps(r)]
    waited, added, approve = results[0], results[1], results[2]
    # Connected while the model waited ("Connected", or the wait tool's own
    # "ready: true" when the servers came up as it asked), or before it asked:
    # Claude Code then withholds the wait tool ("not enabled in this context").
    said = json.dumps(waited["content"])
    ready = ("Connected", "ready: true", "WaitForMcpServers exists but is not enabled")
    assert any(word in said for word in ready), said
    assert not added.get("is_error"), added
    assert "t1-docs" in json.dumps(added["content"])
    assert approve.get("is_error") is True  # no such tool: approving stays human
    assert project.state("t1") == ("research", "awaiting_approval", None)
    assert project.query(
        "SELECT c.stage, c.status, p.slug FROM tasks c JOIN tasks p ON p.id = c.parent_id "
        "WHERE c.slug = 't1-docs'"
    ) == [("research", "ready", "t1")]
    assert project.query("SELECT count(*) FROM task_dependencies") == [(0,)]
    assert project.attempts("t1-docs") == []
    stub.script = Script(file_name="RESEARCH.md", content=RESEARCH)
    out = project.tick()
    assert "t1-docs: research attempt 1 passed" in out, out
    assert project.state("t1-docs")[:2] == ("research", "awaiting_approval")


def test_claude_code_is_error_envelope_is_a_worker_error(
    tmp_path: Path, claude_bin: Path, stub: StubModel
) -> None:
    """The model endpoint refuses: Claude Code prints an envelope with
    is_error (or an API error) and the attempt is the worker's error."""
    project = AgentProject(tmp_path, "claude", claude_bin.parent, stub)
    project.env["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:9/"  # nothing listens there
    project.run("add", "t1", "--title", "Unreachable model")
    project.tick()
    [attempt] = project.attempts("t1")
    assert attempt["outcome"] == "worker_error"
    assert attempt["error"].startswith("worker exited 1; agent reported an error")
    assert "API Error: Unable to connect to API" in attempt["error"]
    assert attempt["cost_usd"] == 0 and attempt["session_id"]


def write_codex_config(home: Path, stub: StubModel) -> None:
    """Codex talks to the scripted server, with no retries and no telemetry."""
    codex_home = home / ".codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(
        'model = "gpt-stub"\n'
        'model_provider = "stub"\n'
        "[analytics]\nenabled = false\n"
        "[features]\nplugins = false\n"
        "[model_providers.stub]\n"
        'name = "stub"\n'
        f'base_url = "{stub.url}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "OPENAI_API_KEY"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
    )


def test_codex_recipe_through_real_ticks(
    tmp_path: Path, codex_bin: Path, stub: StubModel, home_outside_tmp: Path
) -> None:
    """Codex runs its own sandbox through bubblewrap when it is installed,
    and refuses to make its helper binaries under the temporary folder
    (then every write fails): its home is outside /tmp here, as a user's is."""
    project = AgentProject(tmp_path, "codex", codex_bin.parent, stub, home=home_outside_tmp)
    write_codex_config(project.home, stub)
    attempts = run_pipeline(project)
    for attempt in attempts:
        assert attempt["cost_usd"] is None  # Codex reports tokens, not money
        assert attempt["input_tokens"] == 2 * Script().input_tokens
        assert attempt["output_tokens"] == 2 * Script().output_tokens
        assert attempt["turns"] == 1
        assert attempt["session_id"]
    calls = stub.posts("/v1/responses")
    assert len(calls) == 2 * len(STAGES)


def test_aider_recipe_through_real_ticks(tmp_path: Path, aider_bin: Path, stub: StubModel) -> None:
    project = AgentProject(tmp_path, "aider", aider_bin.parent, stub)
    metadata = tmp_path / "models.json"
    metadata.write_text(
        json.dumps(
            {
                "openai/stub": {
                    "max_input_tokens": 100000,
                    "max_output_tokens": 4096,
                    "input_cost_per_token": 3e-06,
                    "output_cost_per_token": 1.5e-05,
                    "litellm_provider": "openai",
                    "mode": "chat",
                }
            }
        )
    )
    project.env.update(
        AIDER_MODEL="openai/stub",
        OPENAI_API_BASE=f"{stub.url}/v1",
        AIDER_MODEL_METADATA_FILE=str(metadata),
        AIDER_EDIT_FORMAT="diff",
        AIDER_MAP_TOKENS="0",
        AIDER_GIT="false",
        AIDER_SHOW_MODEL_WARNINGS="false",
    )
    attempts = run_pipeline(project)
    assert len(stub.posts("/v1/chat/completions")) == len(STAGES)
    assert all(a["cost_usd"] is None for a in attempts)  # plain text reports nothing


def test_script_agent_recipe_reports_usage_through_the_file(
    tmp_path: Path, stub: StubModel
) -> None:
    project = AgentProject(tmp_path, "script", Path(sys.executable).parent, stub)
    project.env.update(
        AGENT_BASE_URL=f"{stub.url}/v1",
        AGENT_MODEL="stub",
        AGENT_USD_PER_MTOK_IN="3",
        AGENT_USD_PER_MTOK_OUT="15",
    )
    attempts = run_pipeline(project)
    script = Script()
    price = (script.input_tokens * 3 + script.output_tokens * 15) / 1e6
    for attempt in attempts:
        assert attempt["cost_usd"] == pytest.approx(price)
        assert attempt["input_tokens"] == script.input_tokens
        assert attempt["turns"] == 1
    for body in stub.posts("/v1/chat/completions"):
        assert body["model"] == "stub"


def make_repository(folder: Path) -> Path:
    """The newcomer's own repository: one commit on `main`."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    env |= {"GIT_AUTHOR_NAME": "me", "GIT_AUTHOR_EMAIL": "me@example.com"}
    env |= {"GIT_COMMITTER_NAME": "me", "GIT_COMMITTER_EMAIL": "me@example.com"}
    folder.mkdir()
    for argv in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(["git", "-C", str(folder), *argv], check=True, env=env)
    return folder


def git_out(repository: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repository), *args], check=True, capture_output=True, text=True
    ).stdout


def test_claude_code_edits_a_task_branch_and_each_stage_is_a_commit(
    tmp_path: Path, claude_bin: Path, stub: StubModel
) -> None:
    """`init --agent claude --repository`: Claude Code writes in the task's
    worktree, and each passed stage becomes one commit on task/t1."""
    repository = make_repository(tmp_path / "myapp")
    project = AgentProject(tmp_path, "claude", claude_bin.parent, stub, repository=repository)
    project.run("add", "t1", "--title", "Add a feature", "--body", "Make it so.")
    for stage, file_name, content, gate in STAGES[:3]:
        project.stub.script = Script(
            file_name=file_name,
            content=content,
            final=f'Stage {stage} done.\n\n```json\n{{"pass": true, "score": 0.9, '
            f'"reasons": ["{stage} ok"], "next_hint": ""}}\n```\n',
        )
        assert f"{stage} attempt 1 passed" in project.tick()
        if gate:
            project.run("approve", "t1")
    workspace = project.dir / "tasks" / "t1"
    assert git_out(workspace, "branch", "--show-current").strip() == "task/t1"
    subjects = git_out(repository, "log", "--format=%s", "main..task/t1").splitlines()
    assert subjects == [
        "t1: code_review (attempt 1)",
        "t1: implement (attempt 1)",
        "t1: research (attempt 1)",
    ]
    # What Claude Code wrote is in the stage's commit, and in the whole change.
    implement = git_out(repository, "show", "--format=", "--name-only", "task/t1~1").split()
    assert implement == ["test_feature.py"]
    whole = project.run("diff", "t1", "--stat").stdout
    assert "RESEARCH.md" in whole and "test_feature.py" in whole
    assert git_out(repository, "status", "--porcelain") == ""  # the user's checkout untouched
