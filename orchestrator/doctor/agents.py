"""`doctor`'s look at the agent CLIs a config runs (claude, codex, aider):
found on PATH, its version, and every flag the stage passes accepted by
its `--help`. A CLI that dropped a flag (Codex's `--full-auto`) fails here,
not at the first tick an hour later.

Version and help are asked once per program (each run is bounded by a
timeout); the flags of every stage using it are checked against that help.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from orchestrator.agents import kinds
from orchestrator.agents.recipes import flags_of
from orchestrator.config import Settings
from orchestrator.doctor.report import Check, Level

NAME = "agent"
MAX_NAMED = 8  # stages named when a program is missing; the rest are counted
TIMEOUT = 30.0
# program name -> the names of the subcommand a recipe runs, e.g. `codex
# exec ...` has its flags documented by `codex exec --help`. Found by name,
# not position: global options may come first (`codex -c k=v exec ...`), and
# those are documented by the program's own `--help`. From the registry:
# every kind that names a program (`AgentKind.program`, `.subcommands`).
KNOWN: dict[str, tuple[str, ...]] = {
    kind.program: kind.subcommands for kind in kinds.KINDS if kind.program is not None
}


@dataclass(frozen=True)
class _Use:
    where: str
    argv: tuple[str, ...]


def agent_checks(settings: Settings) -> list[Check]:
    uses: dict[str, list[_Use]] = {}
    for where, argv in _commands(settings):
        if Path(argv[0]).name in KNOWN:
            uses.setdefault(argv[0], []).append(_Use(where, argv))
    checks: list[Check] = []
    for program, found_uses in uses.items():
        checks += _check_program(program, found_uses)
    return checks


def _commands(settings: Settings) -> Iterator[tuple[str, tuple[str, ...]]]:
    for pipeline in settings.pipelines.values():
        for stage in pipeline.stages:
            for role, argv in (("worker", stage.worker), ("verifier", stage.verifier)):
                if argv is not None:
                    yield f"{pipeline.name}.{stage.name}.{role}", argv


def _check_program(program: str, uses: list[_Use]) -> list[Check]:
    first = uses[0].where
    found = shutil.which(program)
    if found is None:
        # One line for the program, naming every stage it would fail.
        stages = list(dict.fromkeys(use.where.rsplit(".", 1)[0] for use in uses))
        named = ", ".join(stages[:MAX_NAMED]) + (
            f" and {len(stages) - MAX_NAMED} more" if len(stages) > MAX_NAMED else ""
        )
        return [
            Check(
                Level.FAIL,
                NAME,
                f"{program!r} not found on PATH; {len(stages)} "
                f"stage{'s' * (len(stages) != 1)} run it: {named}",
            )
        ]
    version = _run([found, "--version"])
    if version is None:
        return [Check(Level.FAIL, NAME, f"{first}: `{program} --version` did not answer")]
    checks = [Check(Level.OK, NAME, f"{program}: {found}, version {version.splitlines()[0]}")]
    helps: dict[tuple[str, ...], str | None] = {}
    for use in uses:
        for sub, flags in _parts(use.argv, KNOWN[Path(program).name]):
            if sub not in helps:
                helps[sub] = _run([found, *sub, "--help"])
            shown = " ".join((program, *sub, "--help"))
            text = helps[sub]
            if text is None:
                checks.append(Check(Level.FAIL, NAME, f"{use.where}: `{shown}` did not answer"))
                continue
            missing = [flag for flag in flags if not _mentions(text, flag)]
            if missing:
                checks.append(
                    Check(
                        Level.FAIL,
                        NAME,
                        f"{use.where}: {', '.join(missing)} not accepted by this {program} "
                        f"(not in `{shown}`)",
                    )
                )
    if len(checks) == 1:
        checks[0] = Check(Level.OK, NAME, checks[0].detail + "; the stages' flags are accepted")
    return checks


def _parts(
    argv: tuple[str, ...], subcommands: tuple[str, ...]
) -> list[tuple[tuple[str, ...], list[str]]]:
    """(subcommand, the flags its `--help` must show) for each part of
    `argv`: the flags before the subcommand are the program's own."""
    at = next((i for i, arg in enumerate(argv[1:], 1) if arg in subcommands), None)
    if at is None:
        return [((), flags_of(argv))]
    parts: list[tuple[tuple[str, ...], list[str]]] = [((argv[at],), flags_of(argv[at:]))]
    before = flags_of(argv[:at])
    return [((), before), *parts] if before else parts


def _mentions(help_text: str, flag: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text) is not None


def _run(argv: list[str]) -> str | None:
    """stdout (or stderr) of a quick informational command; None when it
    cannot start, fails or hangs."""
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            timeout=TIMEOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (done.stdout or done.stderr).decode("utf-8", "replace").strip()
    return text if done.returncode == 0 and text else None


def lenient_judge_checks(settings: Settings) -> list[Check]:
    """A stage whose verdict an agent CLI prints (its verifier, or its
    worker when it has none) under the lenient rule: a model writing
    `"pass": "fail"` or `"no"` passes it. One warning naming the stages."""
    lenient = []
    for pipeline in settings.pipelines.values():
        for stage in pipeline.stages:
            judge = stage.verifier if stage.verifier is not None else stage.worker
            if judge and Path(judge[0]).name in KNOWN and not stage.strict_verdict:
                lenient.append(f"{pipeline.name}.{stage.name}")
    if not lenient:
        return []
    named = ", ".join(lenient[:MAX_NAMED]) + (
        f" and {len(lenient) - MAX_NAMED} more" if len(lenient) > MAX_NAMED else ""
    )
    return [
        Check(
            Level.WARN,
            "verdict",
            f"{named}: an agent CLI prints the verdict under the lenient rule, where "
            '"pass": "fail" or "no" passes; set strict_verdict = true',
        )
    ]
