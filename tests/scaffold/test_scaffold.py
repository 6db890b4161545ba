"""`init`, `demo`, `cron` and the simulated agent the demo runs."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import create_engine, text
from support import check_invariants

from orchestrator import scaffold
from orchestrator.cli import cli
from orchestrator.config import load_settings
from orchestrator.domain.verdict import parse_verdict
from orchestrator.scaffold import demo_agent
from orchestrator.storage import migrate, schema
from orchestrator.storage.db import make_engine
from orchestrator.storage.schema import HEAD

SEED_STAGES = (
    "research",
    "implement",
    "code_review",
    "bug_find",
    "adversarial_bug_find",
    "doc_review",
    "referee",
)


def invoke(args: list[str], cwd: Path, **env: str | None) -> Result:
    """Run the CLI in-process from `cwd`, with no ORCHESTRATOR_* from the outside."""
    clean: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ORCHESTRATOR_")}
    clean.update(env)
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, args, env=clean, catch_exceptions=False)
    finally:
        os.chdir(old)


def rows(db: Path, sql: str, **params: object) -> list[tuple[object, ...]]:
    engine = create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql), params)]
    finally:
        engine.dispose()


def assert_demo_outcomes(folder: Path) -> None:
    """The four outcomes the demo promises, read from its database."""
    db = folder / "orchestrator.db"
    states = dict(rows(db, "SELECT slug, status || ':' || stage FROM tasks"))
    halts = dict(rows(db, "SELECT slug, halt_reason FROM tasks WHERE halt_reason IS NOT NULL"))
    assert states["fix-login-timeout"] == "complete:complete"
    assert halts == {"speed-up-search": "score_plateau"}
    assert states["speed-up-search"] == "halted:implement"
    # rejected at the gate, then moved on to the end
    events = [
        e
        for (e,) in rows(
            db,
            "SELECT event FROM timeline WHERE task = 'add-dark-mode' ORDER BY seq",
        )
    ]
    assert "reject" in events
    assert events.index("advance") > events.index("reject")
    assert states["add-dark-mode"] == "complete:complete"
    # a gate opened by an approval (by the demo's "person"), then advanced
    approvals = rows(db, "SELECT task, actor FROM timeline WHERE event = 'approve'")
    assert ("fix-login-timeout", "demo") in approvals
    assert states["update-readme"] == "awaiting_approval:research"
    # the retry got the verifier's hint
    hints = rows(
        db,
        "SELECT hint FROM attempts a JOIN tasks t ON t.id = a.task_id "
        "WHERE t.slug = 'fix-login-timeout' AND a.stage = 'implement' ORDER BY a.number",
    )
    assert hints[0] == ("",)
    assert "empty-input" in str(hints[1][0])
    assert check_invariants(f"sqlite:///{db}", allow_running=False) == []


# -- demo ---------------------------------------------------------------------------------


def test_demo_in_process(tmp_path: Path) -> None:
    stray = tmp_path / "not-this.db"
    result = invoke(
        ["demo", "--dir", "show"],
        tmp_path,
        ORCHESTRATOR_DB_URL=f"sqlite:///{stray}",
        ORCHESTRATOR_CONFIG=str(tmp_path / "missing.toml"),
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    for expected in (
        "$ orchestrator approve fix-login-timeout",
        '$ orchestrator reject add-dark-mode --note "Also cover',
        "implement:halted (score_plateau)",
        "-> complete",
        "FROM score_history",
        "FROM timeline",
        "Applied the feedback: Also cover the settings page",
        "Explore further",
        "orchestrator approve update-readme",
    ):
        assert expected in out
    # the status table is printed before the SQL
    assert out.index("$ orchestrator list") < out.index("FROM score_history")
    assert not stray.exists()  # --db / ORCHESTRATOR_DB_URL never reach the demo
    assert_demo_outcomes(tmp_path / "show")


def test_demo_refuses_a_non_empty_folder_unless_forced(tmp_path: Path) -> None:
    folder = tmp_path / "busy"
    folder.mkdir()
    (folder / "mine.txt").write_text("keep me")
    refused = invoke(["demo", "--dir", str(folder)], tmp_path)
    assert refused.exit_code == 1
    assert "--force" in refused.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["mine.txt"]

    first = invoke(["demo", "--dir", str(folder), "--force"], tmp_path)
    assert first.exit_code == 0, first.output
    again = invoke(["demo", "--dir", str(folder), "--force"], tmp_path)
    assert again.exit_code == 0, again.output
    assert (folder / "mine.txt").read_text() == "keep me"
    assert_demo_outcomes(folder)


def test_demo_refuses_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    result = invoke(["demo", "--dir", "f"], tmp_path)
    assert result.exit_code == 2  # click's own check of a --dir that is a file
    assert "is a file" in result.stderr


def test_demo_as_a_real_process(tmp_path: Path) -> None:
    """What the demo does, not how fast: its time is its own line in the
    output, for people; a loaded machine must not fail it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # a safety net against a hang
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "Demo finished in" in done.stdout
    assert_demo_outcomes(tmp_path / scaffold.DEMO_DIR)


# -- init ---------------------------------------------------------------------------------


def test_init_writes_a_loadable_config_and_creates_the_database(tmp_path: Path) -> None:
    result = invoke(["init"], tmp_path)
    assert result.exit_code == 0, result.output
    config = tmp_path / "orchestrator.toml"
    settings = load_settings(config=config, environ={})
    pipeline = settings.pipelines["default"]
    assert pipeline.stage_names == SEED_STAGES
    gates = [s.name for s in pipeline.stages if s.gate]
    assert gates == ["research", "code_review"]
    for stage in pipeline.stages:
        assert stage.prompt is not None and stage.prompt.is_file()
        assert stage.stdin == "prompt"
    for judge in scaffold.INIT_JUDGES:
        path = tmp_path / "judges" / judge
        assert path.stat().st_mode & stat.S_IXUSR
        # commands run in the workspace, so judge paths in argv are absolute
        assert str(path) in config.read_text()
    assert (tmp_path / "orchestrator.db").is_file()
    engine = make_engine(settings.database_url)
    try:
        assert migrate.current(engine) == HEAD
    finally:
        engine.dispose()
    assert f"database at {schema.HEAD} (created)" in result.stdout


def test_init_prompts_use_only_known_placeholders(tmp_path: Path) -> None:
    import re

    assert invoke(["init"], tmp_path).exit_code == 0
    known = {"task", "title", "body", "stage", "attempt", "workspace", "hint"}
    known |= {"prev_outcome", "prev_score", "reasons", "history", "context_file", "prev_session"}
    for prompt in (tmp_path / "prompts").iterdir():
        used = set(re.findall(r"\{([a-z_]+)\}", prompt.read_text()))
        assert used <= known, prompt
        assert {"task", "title", "body", "hint"} <= used, prompt


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    assert invoke(["init"], tmp_path).exit_code == 0
    config = tmp_path / "orchestrator.toml"
    config.write_text(config.read_text() + "\n# my edit\n")
    prompt = tmp_path / "prompts" / "research.md"
    prompt.write_text("my own prompt {task}")

    refused = invoke(["init"], tmp_path)
    assert refused.exit_code == 1
    assert "already exists" in refused.stderr and "--force" in refused.stderr
    assert "# my edit" in config.read_text()

    forced = invoke(["init", "--force"], tmp_path)
    assert forced.exit_code == 0, forced.output
    assert "# my edit" not in config.read_text()
    assert prompt.read_text() == "my own prompt {task}"  # edits to prompts are kept
    assert "kept  prompts/research.md" in forced.stdout
    assert f"(was {schema.HEAD})" in forced.stdout


def test_init_honours_config_and_db(tmp_path: Path) -> None:
    target = tmp_path / "nested" / "proj.toml"
    db = tmp_path / "elsewhere.db"
    result = invoke(["--config", str(target), "--db", f"sqlite:///{db}", "init"], tmp_path)
    assert result.exit_code == 0, result.output
    assert target.is_file() and (tmp_path / "nested" / "prompts" / "referee.md").is_file()
    assert db.is_file()
    assert not (tmp_path / "nested" / "orchestrator.db").exists()


def test_after_init_a_task_can_be_added_and_ticked(tmp_path: Path) -> None:
    assert invoke(["init"], tmp_path).exit_code == 0
    assert invoke(["add", "t1", "--title", "First"], tmp_path).exit_code == 0
    # the agents are not installed here: a fault of the setup, not the task's,
    # so the task stays ready (no attempt spent) and the tick ends 78 saying why
    ticked = invoke(["tick"], tmp_path, PATH="/nonexistent")
    assert ticked.exit_code == 78, ticked.output
    assert "command not found: 'claude'" in ticked.output
    listed = json.loads(invoke(["list", "--json"], tmp_path).stdout)
    assert listed[0]["state"] == "research"
    explained = json.loads(invoke(["explain", "t1", "--json"], tmp_path).stdout)
    assert explained["attempts"]["used"] == 0


# -- the judges init writes ------------------------------------------------------------------


@pytest.fixture
def judges(tmp_path: Path) -> Path:
    assert invoke(["init"], tmp_path).exit_code == 0
    return tmp_path / "judges"


def run_judge(judges: Path, name: str, *args: str, cwd: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, str(judges / name), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    verdict = parse_verdict(done.stdout)
    assert verdict is not None, (done.stdout, done.stderr)
    return verdict.to_dict()


def test_pytest_judge(tmp_path: Path, judges: Path) -> None:
    work = tmp_path / "ws"
    work.mkdir()
    (work / "test_a.py").write_text(
        "def test_ok():\n    pass\n\ndef test_bad():\n    assert 1 == 2, 'one is not two'\n"
    )
    failing = run_judge(judges, "pytest_judge.py", cwd=work)
    assert failing["pass"] is False
    assert failing["score"] == 0.5
    assert "test_bad" in str(failing["next_hint"])
    (work / "test_a.py").write_text("def test_ok():\n    pass\n")
    assert run_judge(judges, "pytest_judge.py", cwd=work) == {
        "pass": True,
        "score": 1.0,
        "reasons": ["1 passed, 0 failed, 0 errors"],
        "next_hint": "",
    }
    # A conftest the change broke is a failing verdict with the cause as hint.
    (work / "conftest.py").write_text("import nonexistent_mod\n")
    broken = run_judge(judges, "pytest_judge.py", cwd=work)
    assert broken["pass"] is False and "nonexistent_mod" in str(broken["next_hint"])
    (work / "conftest.py").unlink()
    (work / "test_a.py").unlink()
    empty = run_judge(judges, "pytest_judge.py", cwd=work)
    assert empty["pass"] is False and empty["score"] == 0.0


def test_sections_judge(tmp_path: Path, judges: Path) -> None:
    work = tmp_path / "ws"
    work.mkdir()
    args = ("RESEARCH.md", "## Scope", "## Plan")
    missing = run_judge(judges, "sections_judge.py", *args, cwd=work)
    assert missing["pass"] is False and missing["next_hint"] == "write RESEARCH.md"
    (work / "RESEARCH.md").write_text("## Scope\n" + "word " * 50)
    half = run_judge(judges, "sections_judge.py", *args, cwd=work)
    assert half["score"] == 0.5 and "## Plan" in str(half["next_hint"])
    (work / "RESEARCH.md").write_text("## Scope\n" + "word " * 30 + "\n## Plan\n" + "w " * 30)
    assert run_judge(judges, "sections_judge.py", *args, cwd=work)["pass"] is True


# -- cron -----------------------------------------------------------------------------------


def test_cron_prints_an_absolute_crontab_line(tmp_path: Path) -> None:
    assert invoke(["init"], tmp_path).exit_code == 0
    result = invoke(["cron"], tmp_path, PATH="/opt/agents/bin:/usr/bin:/bin")
    assert result.exit_code == 0, result.output
    line = result.stdout.strip()
    assert "\n" not in line
    assert line.startswith("* * * * * PATH=/opt/agents/bin:/usr/bin:/bin ")
    assert f"--config {tmp_path / 'orchestrator.toml'} tick --quiet" in line
    assert line.endswith(f">> {tmp_path / 'orchestrator.log'} 2>&1")
    program = line.split()[6]
    assert Path(program).is_absolute()
    assert "cron --install" in result.stderr


@pytest.mark.parametrize(
    ("every", "schedule"),
    [(1, "* * * * *"), (5, "*/5 * * * *"), (60, "0 * * * *"), (180, "0 */3 * * *")],
)
def test_cron_schedules(every: int, schedule: str) -> None:
    assert scaffold.cron_schedule(every) == schedule


def test_cron_refuses_what_cron_cannot_say_and_needs_a_config(tmp_path: Path) -> None:
    assert invoke(["cron"], tmp_path).exit_code == 78
    assert invoke(["init"], tmp_path).exit_code == 0
    bad = invoke(["cron", "--every", "90"], tmp_path)
    assert bad.exit_code == 2
    assert "90 minutes" in bad.stderr


def test_cron_escapes_percent_and_passes_db(tmp_path: Path) -> None:
    assert invoke(["init"], tmp_path).exit_code == 0
    url = "postgresql+psycopg://u:p%40ss@db/orch"
    line = invoke(["--db", url, "cron"], tmp_path).stdout
    assert "--db postgresql+psycopg://u:p\\%40ss@db/orch tick" in line
    # a relative SQLite path means "here" on the command line: cron gets it absolute
    line = invoke(["--db", "sqlite:///x.db", "cron"], tmp_path).stdout
    assert f"--db sqlite:///{tmp_path / 'x.db'} tick" in line


# -- the simulated agent ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "stage", "expected"),
    [
        ("no line", "implement", "steady"),
        ("Simulation: implement=stuck", "implement", "stuck"),
        ("simulation: research=learns implement=stuck", "research", "learns"),
        ("Simulation: implement=bogus", "implement", "steady"),
        ("Simulation: implement=stuck", "review", "steady"),
    ],
)
def test_demo_agent_behaviour(prompt: str, stage: str, expected: str) -> None:
    assert demo_agent.behaviour_for(prompt, stage) == expected


def test_demo_agent_work_then_verify(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHESTRATOR_WORKSPACE", str(tmp_path))
    monkeypatch.setenv("ORCHESTRATOR_STAGE", "implement")
    monkeypatch.setenv("ORCHESTRATOR_NEXT_HINT", "")
    assert demo_agent.verdict_for("implement", tmp_path)["pass"] is False  # nothing written
    demo_agent.work("Simulation: implement=learns")
    first = demo_agent.verdict_for("implement", tmp_path)
    assert first["pass"] is False and first["next_hint"]
    monkeypatch.setenv("ORCHESTRATOR_NEXT_HINT", str(first["next_hint"]))
    demo_agent.work("Simulation: implement=learns")
    assert demo_agent.verdict_for("implement", tmp_path)["pass"] is True
    assert demo_agent.main(["nonsense"]) == 2


@pytest.mark.parametrize("value", ["/a/b c", 'q"x', "back\\slash", "emoji😀", "tab\tnl\n\x7f\x01"])
def test_toml_string_round_trips(value: str) -> None:
    import tomllib

    assert tomllib.loads(f"k = {scaffold.toml_string(value)}")["k"] == value


def test_init_in_an_oddly_named_folder(tmp_path: Path) -> None:
    folder = tmp_path / 'my "tasks" \\ ünï'
    folder.mkdir()
    assert invoke(["init"], folder).exit_code == 0
    settings = load_settings(config=folder / "orchestrator.toml", environ={})
    verifier = settings.pipelines["default"].stages[1].verifier
    assert verifier is not None and Path(verifier[1]).is_file()
