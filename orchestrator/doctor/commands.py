"""Checks of the stages' commands, prompt templates and judges.

A worker binary that is not installed fails every attempt, so it is found
here, resolved the way the runner resolves it, before cron runs it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from orchestrator.config import Settings
from orchestrator.doctor.agents import KNOWN as AGENT_PROGRAMS
from orchestrator.doctor.report import Check, Level


def _commands(settings: Settings) -> Iterator[tuple[str, tuple[str, ...]]]:
    for pipeline in settings.pipelines.values():
        if pipeline.setup is not None:
            yield f"{pipeline.name}.setup", pipeline.setup
        for stage in pipeline.stages:
            for role, argv in (("worker", stage.worker), ("verifier", stage.verifier)):
                if argv is not None:
                    yield f"{pipeline.name}.{stage.name}.{role}", argv


def command_check(where: str, argv: tuple[str, ...], config_dir: Path) -> Check:
    """Does argv[0] name a program that will start?

    Bare names are looked up on PATH (cron's PATH is shorter than a login
    shell's: check under the same PATH cron uses). Commands run in the
    task's workspace, so a relative path is resolved there at run time, not
    beside the config: it is a warning, since doctor cannot know it exists.
    """
    program = argv[0]
    if "{" in program:
        return Check(
            Level.WARN, "command", f"{where}: {program!r} depends on the task; not checked"
        )
    if "/" not in program:
        found = shutil.which(program)
        if found is None:
            return Check(Level.FAIL, "command", f"{where}: {program!r} not found on PATH")
        return _script_args(where, argv, found)
    path = Path(program).expanduser()
    if not path.is_absolute():
        beside = config_dir / path
        hint = " (it exists beside the config; write it absolute)" if beside.exists() else ""
        return Check(
            Level.WARN,
            "command",
            f"{where}: {program!r} is relative, so it is looked up in each task's workspace{hint}",
        )
    if not (path.is_file() and os.access(path, os.X_OK)):
        return Check(Level.FAIL, "command", f"{where}: {program} is not an executable file")
    return _script_args(where, argv, str(path))


def _script_args(where: str, argv: tuple[str, ...], found: str) -> Check:
    """Also catch `python3 /gone/judge.py`: an absolute script argument that is missing."""
    for arg in argv[1:]:
        if (
            arg.startswith("/")
            and "{" not in arg
            and arg.endswith((".py", ".sh"))
            and not Path(arg).exists()
        ):
            return Check(Level.FAIL, "command", f"{where}: script {arg} does not exist")
    return Check(Level.OK, "command", f"{where}: {found}")


def _command_checks(settings: Settings) -> list[Check]:
    seen: set[tuple[str, ...]] = set()
    checks = []
    for where, template in _commands(settings):
        if Path(template[0]).name in AGENT_PROGRAMS:
            continue  # the agent check says it once, with every stage it breaks
        argv = tuple(arg.replace("{config_dir}", str(settings.base_dir)) for arg in template)
        # The same program (and script) in seven stages is one line, not seven.
        key = (argv[0], *(arg for arg in argv[1:] if arg.endswith((".py", ".sh"))))
        if key in seen:
            continue
        seen.add(key)
        checks.append(command_check(where, argv, settings.base_dir))
    return checks


def _prompt_checks(settings: Settings) -> list[Check]:
    checks = []
    found = 0
    for pipeline in settings.pipelines.values():
        for stage in pipeline.stages:
            if stage.prompt is None:
                continue
            if stage.prompt.is_file() and os.access(stage.prompt, os.R_OK):
                found += 1
            else:
                where = f"{pipeline.name}.{stage.name}.prompt"
                checks.append(Check(Level.FAIL, "prompts", f"{where}: {stage.prompt} not found"))
    if found:
        checks.insert(0, Check(Level.OK, "prompts", f"{found} prompt templates found"))
    return checks


PYTEST_JUDGE = "pytest_judge.py"


def _judge_checks(settings: Settings) -> list[Check]:
    """Does pytest import in the interpreter the pytest judge will use?

    A judge that cannot run its tool fails every attempt (it prints no
    verdict); the interpreter is `--python X` when given, else the one
    running the judge. Checked once per interpreter, in the config's folder.
    """
    seen: set[str] = set()
    checks = []
    for where, argv in _commands(settings):
        if not any(Path(arg).name == PYTEST_JUDGE for arg in argv[1:]):
            continue
        index = argv.index("--python") if "--python" in argv else -1
        python = argv[index + 1] if 0 <= index < len(argv) - 1 else argv[0]
        if python in seen:
            continue
        seen.add(python)
        checks.append(_pytest_imports(where, python, settings.base_dir))
    return checks


def _pytest_imports(where: str, python: str, folder: Path) -> Check:
    import subprocess

    if "{" in python:
        return Check(Level.WARN, "judge", f"{where}: {python!r} depends on the task; not checked")
    found = shutil.which(python) if "/" not in python else python
    if found is None or not Path(found).is_absolute():
        return Check(Level.WARN, "judge", f"{where}: {python!r} is not found here; not checked")
    try:
        probe = subprocess.run(
            [found, "-c", "import pytest"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(Level.FAIL, "judge", f"{where}: cannot run {found}: {exc}")
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines() or ["(no output)"]
        return Check(
            Level.FAIL,
            "judge",
            f"{where}: pytest does not import in {found} ({lines[-1][:200]}); "
            "give the judge --python with your project's interpreter",
        )
    return Check(Level.OK, "judge", f"{where}: pytest imports in {found}")
