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

import dataclasses
import os
import shutil
import subprocess
import types
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
    sourced = _with_env_file(settings)
    for pipeline in settings.pipelines.values():
        landing = pipeline.landing
        env = check_environment(sourced, "doctor", landing.secrets)
        if landing.lands and landing.check:
            checks.append(_probe(pipeline, landing.check, env))
        if landing.mode == "pr":
            checks += _pull_request_checks(pipeline, env)
    return checks


def _with_env_file(settings: Settings) -> Settings:
    """The settings with `env_file`'s values, as a tick reads them (a file
    it refuses is the secrets check's to report: none of its values then)."""
    if settings.env_file is None:
        return settings
    from orchestrator.config.envfile import read_env_file
    from orchestrator.errors import ConfigError

    try:
        values = read_env_file(settings.env_file)
    except ConfigError:
        return settings
    return dataclasses.replace(settings, env_file_values=types.MappingProxyType(values))


def _pull_request_checks(pipeline: PipelineConfig, env: Mapping[str, str]) -> list[Check]:
    """`land = "pr"`: `gh` on the landing's PATH and logged in there (a
    token the landing is given counts), and the remote naming a GitHub
    repository (or `GH_REPO` given)."""
    from orchestrator.features.landing.pull_request import github_repository
    from orchestrator.workspace.gitrun import GIT_TIMEOUT, SafeGit

    where = f"{pipeline.name}.land"
    checks: list[Check] = []
    gh = shutil.which("gh", path=env.get("PATH", ""))
    if gh is None:
        checks.append(Check(Level.FAIL, "land_pr", f"{where}: gh is not on the landing's PATH"))
    else:
        checks.append(_gh_login(where, gh, env))
    remote = pipeline.landing.remote
    url = None
    if pipeline.repository is not None:
        found = SafeGit(pipeline.repository, timeout=GIT_TIMEOUT).out(
            "config", "--get", f"remote.{remote}.url"
        )
        url = None if found is None else found.decode("utf-8", "replace").strip()
    if url is None:
        checks.append(
            Check(Level.FAIL, "land_pr", f"{where}: the repository has no remote {remote!r}")
        )
    elif env.get("GH_REPO"):
        checks.append(Check(Level.OK, "land_pr", f"{where}: {remote} {url}, GH_REPO given"))
    elif github_repository(url, env.get("GH_HOST")) is None:
        checks.append(
            Check(
                Level.FAIL,
                "land_pr",
                f"{where}: remote {remote} ({url}) names no GitHub repository; give GH_REPO "
                "([orchestrator] env)",
            )
        )
    else:
        checks.append(Check(Level.OK, "land_pr", f"{where}: remote {remote} {url}"))
    return checks


def _gh_login(where: str, gh: str, env: Mapping[str, str]) -> Check:
    from orchestrator.features.landing.pull_request import gh_environment

    try:
        done = subprocess.run(
            [gh, "auth", "status"],
            env=gh_environment(env),
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Check(Level.FAIL, "land_pr", f"{where}: gh auth status did not answer")
    except OSError as exc:
        return Check(Level.FAIL, "land_pr", f"{where}: cannot run {gh}: {exc.strerror or exc}")
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines() or ["(no output)"]
        return Check(
            Level.FAIL,
            "land_pr",
            f"{where}: gh is not logged in for the landing ({said[-1][:200]}); `gh auth "
            'login`, or land_secrets = ["GH_TOKEN"] with the token in env_file',
        )
    return Check(Level.OK, "land_pr", f"{where}: {gh} logged in")


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
