"""Checks of each pipeline's `land_check`: its program is found on the
PATH the check is given, and for `python -m X` the interpreter starts and
`X` imports. A check that cannot start fails every landing, and each
failure sends the task back to run its stages again (up to
`max_land_sendbacks`), so it is found here, before cron spends hours on it.

The probe runs the interpreter alone (`-c`, never the check itself: that
runs the project's tests), argv only, under a timeout, in the environment
the landing gives the check, in the repository's folder. Doctor's own
environment stands for the tick's: run it as cron would to see cron's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from orchestrator.config import PipelineConfig, Settings
from orchestrator.doctor.report import Check, Level
from orchestrator.features.landing.land_check import check_environment

NAME = "land_check"
PROBE_TIMEOUT = 30.0
# The module is handed as an argument, never pasted into code.
IMPORTS = "import importlib, sys; importlib.import_module(sys.argv[1])"


def land_checks(settings: Settings) -> list[Check]:
    checks = []
    for pipeline in settings.pipelines.values():
        argv = pipeline.landing.check
        if pipeline.landing.lands and argv:
            checks.append(_probe(pipeline, argv, check_environment(settings, "doctor")))
    return checks


def _probe(pipeline: PipelineConfig, argv: tuple[str, ...], env: Mapping[str, str]) -> Check:
    where = f"{pipeline.name}.land_check"
    program = argv[0]
    if "/" not in program:
        found = shutil.which(program, path=env.get("PATH", ""))
        if found is None:
            return Check(
                Level.FAIL,
                NAME,
                f"{where}: {program!r} not found on PATH {env.get('PATH', '')!r}; "
                "name it by its absolute path (your project's interpreter)",
            )
    elif not Path(program).is_absolute():
        return Check(
            Level.WARN,
            NAME,
            f"{where}: {program!r} is relative, so it is looked up in each task's worktree; "
            "not checked",
        )
    else:
        found = program
    if not (Path(found).is_file() and os.access(found, os.X_OK)):
        return Check(Level.FAIL, NAME, f"{where}: {found} is not an executable file")
    if not Path(found).name.startswith("python"):
        return Check(Level.OK, NAME, f"{where}: {found}")  # found; what it runs is the check's
    module = argv[2] if len(argv) > 2 and argv[1] == "-m" else None
    probe_argv = [found, "-c", "pass"] if module is None else [found, "-c", IMPORTS, module]
    cwd = pipeline.repository if pipeline.repository is not None else Path.cwd()
    try:
        probe = subprocess.run(
            probe_argv,
            cwd=cwd,
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Check(Level.FAIL, NAME, f"{where}: {found} did not start in {PROBE_TIMEOUT:g}s")
    except OSError as exc:
        return Check(Level.FAIL, NAME, f"{where}: cannot run {found}: {exc.strerror or exc}")
    lines = probe.stderr.strip().splitlines() or ["(no output)"]
    if probe.returncode != 0 and module is None:
        return Check(Level.FAIL, NAME, f"{where}: {found} does not start ({lines[-1][:200]})")
    if probe.returncode != 0:
        return Check(
            Level.FAIL,
            NAME,
            f"{where}: {module} does not import in {found} ({lines[-1][:200]}); every landing "
            f"would fail: install it there, or name your project's interpreter",
        )
    if module is None:
        return Check(Level.OK, NAME, f"{where}: {found} starts")
    return Check(Level.OK, NAME, f"{where}: {module} imports in {found}")
