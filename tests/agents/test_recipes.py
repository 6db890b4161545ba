"""The recipes: `init --agent` writes exactly the example, every recipe
loads, and `doctor` checks the real CLIs' flags (the Codex flag that is
gone fails it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.agents.kinds import NAMES as AGENTS
from orchestrator.agents.recipes import examples_dir
from orchestrator.config import load_settings

ROOT = Path(__file__).resolve().parents[2]


def orchestrator(
    folder: Path, *args: str, path: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    if path is not None:
        env["PATH"] = path
    return subprocess.run(  # noqa: PLW1510 - the caller checks returncode
        [sys.executable, "-m", "orchestrator", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("agent", AGENTS)
def test_init_agent_writes_the_example(tmp_path: Path, agent: str) -> None:
    done = orchestrator(tmp_path, "init", "--agent", agent)
    assert done.returncode == 0, done.stderr
    written = (tmp_path / "orchestrator.toml").read_text()
    assert written == (ROOT / "examples" / agent / "orchestrator.toml").read_text()
    assert examples_dir() == ROOT / "examples"
    settings = load_settings(config=tmp_path / "orchestrator.toml", db_url=None, environ={})
    stages = settings.pipelines["default"].stages
    assert [s.name for s in stages] == [
        "research",
        "implement",
        "code_review",
        "bug_find",
        "adversarial_bug_find",
        "doc_review",
        "referee",
    ]
    for stage in stages:  # every stage has its prompt, and the key only where it is used
        assert stage.prompt is not None and stage.prompt.is_file()
        assert stage.secrets and set(stage.secrets) <= set(settings.env_deny)
    referee = stages[-1]
    assert referee.worker is None and referee.verifier is not None
    assert "```json" in referee.prompt.read_text()  # the LLM judge asks for a fenced verdict
    if agent == "script":
        assert (tmp_path / "agents" / "script_agent.py").is_file()


def test_default_init_has_no_codex_full_auto(tmp_path: Path) -> None:
    assert orchestrator(tmp_path, "init").returncode == 0
    assert "--full-auto" not in (tmp_path / "orchestrator.toml").read_text()


def test_doctor_checks_the_real_cli_flags(
    tmp_path: Path, claude_bin: Path, codex_bin: Path
) -> None:
    path = os.pathsep.join([str(claude_bin.parent), str(codex_bin.parent), os.environ["PATH"]])
    for agent, version in (("claude", "2.1.197"), ("codex", "0.171.0")):
        folder = tmp_path / agent
        folder.mkdir()
        assert orchestrator(folder, "init", "--agent", agent).returncode == 0
        done = orchestrator(folder, "doctor", path=path)
        line = next(
            x for x in done.stdout.splitlines() if x.startswith(("ok    agent", "fail  agent"))
        )
        assert line.startswith("ok    agent") and version in line, done.stdout
        assert "the stages' flags are accepted" in line

    # The recipe every Codex user had: `--full-auto` is gone from 0.171.0.
    config = tmp_path / "codex" / "orchestrator.toml"
    config.write_text(
        config.read_text().replace('"exec", "-s", "workspace-write"', '"exec", "--full-auto"', 1)
    )
    done = orchestrator(tmp_path / "codex", "doctor", path=path)
    assert done.returncode == 1
    assert (
        "fail  agent      default.research.worker: --full-auto not accepted by this codex "
        "(not in `codex exec --help`)"
    ) in done.stdout


def test_doctor_fails_an_agent_not_on_path(tmp_path: Path) -> None:
    assert orchestrator(tmp_path, "init", "--agent", "aider").returncode == 0
    done = orchestrator(tmp_path, "doctor", path=str(Path(sys.executable).parent))
    assert done.returncode == 1
    # Once, as the agent, naming every stage it would fail; not again as a command.
    [line] = [line for line in done.stdout.splitlines() if "aider" in line]
    assert line.startswith("fail  agent      'aider' not found on PATH; 7 stages run it: ")
    for stage in ("default.research", "default.implement", "default.referee"):
        assert stage in line, line


# review finding: doctor takes argv[1] as Codex's subcommand, so a recipe with
# a global option before it (`codex -c key=value exec ...`, which Codex
# accepts) is checked with `codex -c --help`, which fails: a false `fail`.
def test_doctor_accepts_codex_global_options_before_exec(tmp_path: Path, codex_bin: Path) -> None:
    path = os.pathsep.join([str(codex_bin.parent), os.environ["PATH"]])
    assert orchestrator(tmp_path, "init", "--agent", "codex").returncode == 0
    config = tmp_path / "orchestrator.toml"
    config.write_text(
        config.read_text().replace(
            '["codex", "exec",', '["codex", "-c", "model_reasoning_effort=high", "exec",', 1
        )
    )
    done = orchestrator(tmp_path, "doctor", path=path)
    assert "fail  agent" not in done.stdout, done.stdout
