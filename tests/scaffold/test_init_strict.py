"""`init` writes its LLM judges strict: through real processes, the referee
of `init --agent claude` whose model writes `"pass": "fail"` fails the
stage (`invalid_verdict`), where the lenient rule would pass it; and
`doctor` warns about a lenient stage an agent CLI judges."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from sqlalchemy import create_engine, text
from support import run_orchestrator

STAGES = "[[pipelines.default.stages]]\n"


def fake_claude(folder: Path, verdict: dict[str, object]) -> None:
    """A `claude -p --output-format json` that answers with one result envelope."""
    folder.mkdir(exist_ok=True)
    said = "The change looks wrong.\n```json\n" + json.dumps(verdict) + "\n```"
    envelope = {"type": "result", "is_error": False, "result": said, "total_cost_usd": 0.01}
    script = folder / "claude"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.stdin.read()\nprint({json.dumps(envelope)!r})\n"
    )
    script.chmod(0o755)


def run(folder: Path, bin_dir: Path, *args: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", ANTHROPIC_API_KEY="sk-test")
    done = run_orchestrator(args, cwd=folder, env=env)
    return done.returncode, done.stdout + done.stderr


def referee_only(folder: Path, *, strict: bool) -> None:
    """init's config with its referee stage alone, as init wrote it."""
    config = folder / "orchestrator.toml"
    written = config.read_text()
    head, *stages = written.split(STAGES)
    [referee] = [s for s in stages if s.startswith('name = "referee"')]
    assert "strict_verdict = true" in referee
    if not strict:
        referee = "\n".join(
            line for line in referee.splitlines() if not line.startswith("strict_verdict")
        )
    config.write_text(head + STAGES + referee + "\n")


def outcome(folder: Path, slug: str) -> tuple[str, str]:
    engine = create_engine(f"sqlite:///{folder / 'orchestrator.db'}")
    try:
        with engine.connect() as conn:
            row = conn.execute(
                text(
                    "SELECT a.outcome, t.status FROM attempts a JOIN tasks t "
                    "ON t.id = a.task_id WHERE t.slug = :s ORDER BY a.id DESC"
                ),
                {"s": slug},
            ).first()
    finally:
        engine.dispose()
    assert row is not None
    return str(row[0]), str(row[1])


def test_init_agent_claudes_referee_refuses_pass_fail(tmp_path: Path) -> None:
    folder, bin_dir = tmp_path / "proj", tmp_path / "bin"
    folder.mkdir()
    fake_claude(bin_dir, {"pass": "fail", "score": 0.9})
    code, said = run(folder, bin_dir, "init", "--agent", "claude")
    assert code == 0, said
    referee_only(folder, strict=True)
    assert run(folder, bin_dir, "add", "t1", "--title", "x")[0] == 0
    code, said = run(folder, bin_dir, "tick")
    assert code == 0, said
    assert outcome(folder, "t1") == ("invalid_verdict", "ready"), said
    assert 'strict_verdict: "pass" must be true or false' in said or "invalid_verdict" in said


def test_the_lenient_rule_would_pass_it_and_doctor_warns(tmp_path: Path) -> None:
    folder, bin_dir = tmp_path / "proj", tmp_path / "bin"
    folder.mkdir()
    fake_claude(bin_dir, {"pass": "fail", "score": 0.9})
    assert run(folder, bin_dir, "init", "--agent", "claude")[0] == 0
    _code, said = run(folder, bin_dir, "doctor")
    assert not [line for line in said.splitlines() if line.split()[1:2] == ["verdict"]]
    referee_only(folder, strict=False)
    _code, said = run(folder, bin_dir, "doctor")
    [warning] = [line for line in said.splitlines() if line.split()[1:2] == ["verdict"]]
    assert warning.startswith("warn") and "default.referee" in warning
    assert run(folder, bin_dir, "add", "t1", "--title", "x")[0] == 0
    assert run(folder, bin_dir, "tick")[0] == 0
    assert outcome(folder, "t1") == ("passed", "complete")  # the trap strict_verdict closes
