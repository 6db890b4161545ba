"""`init --agent claude --mcp`: the MCP config it writes and the commands
that name it (the real Claude Code reading them is in test_real_agents)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.config import load_settings


def _init(folder: Path, *args: str) -> tuple[int, str]:
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ORCHESTRATOR_")}
    config = folder / "orchestrator.toml"
    result = CliRunner().invoke(
        cli, ["--config", str(config), "init", *args], env=env, catch_exceptions=False
    )
    return result.exit_code, result.output


def test_the_claude_recipe_registers_the_server(tmp_path: Path) -> None:
    code, out = _init(tmp_path, "--agent", "claude", "--mcp")
    assert code == 0, out
    config = tmp_path / "orchestrator.toml"
    server = json.loads((tmp_path / "mcp.json").read_text())["mcpServers"]["orchestrator"]
    assert server == {
        "type": "stdio",
        "command": sys.executable,
        "args": ["-m", "orchestrator", "--config", str(config), "mcp"],
    }
    settings = load_settings(config=config)
    commands = [
        argv
        for pipeline in settings.pipelines.values()
        for stage in pipeline.stages
        for argv in (stage.worker, stage.verifier)
        if argv and argv[0] == "claude"
    ]
    assert len(commands) == 7
    for argv in commands:
        assert argv[1:8] == (
            "-p",
            "--mcp-config",
            "{config_dir}/mcp.json",
            "--strict-mcp-config",
            "--allowedTools",
            "mcp__orchestrator",
            "--output-format",
        )


def test_mcp_with_another_agent_is_refused(tmp_path: Path) -> None:
    code, out = _init(tmp_path, "--agent", "codex", "--mcp")
    assert code == 1
    assert "use --agent claude" in out
    assert not (tmp_path / "mcp.json").exists()
    assert not (tmp_path / "orchestrator.toml").exists()


def test_with_the_sandbox_the_server_s_python_is_bound_read_only(tmp_path: Path) -> None:
    """The sandbox hides the home (pyenv) and the project (a venv in it):
    what mcp.json names must be bound back, or the server cannot start."""
    code, out = _init(tmp_path, "--agent", "claude", "--mcp", "--sandbox")
    assert code == 0, out
    server = json.loads((tmp_path / "mcp.json").read_text())["mcpServers"]["orchestrator"]
    settings = load_settings(config=tmp_path / "orchestrator.toml")
    import orchestrator

    needed = [
        Path(os.path.realpath(server["command"])),
        Path(os.path.realpath(sys.prefix)),
        Path(os.path.realpath(Path(orchestrator.__file__).parent)),
    ]
    for pipeline in settings.pipelines.values():
        for stage in pipeline.stages:
            bound = [Path(p) for p in stage.sandbox.ro if Path(p).is_absolute()]
            for path in needed:
                assert any(path == b or b in path.parents for b in bound), (stage.name, path)
