"""The stages' secrets: will a tick find them, and will a cron tick?

A key exported in the shell that runs `doctor` is not in cron's
environment; only `env_file` reaches a cron tick. So a secret found in
neither place fails, and one found only in this shell warns.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from orchestrator.config import Settings
from orchestrator.config.envfile import read_env_file
from orchestrator.doctor.report import Check, Level
from orchestrator.errors import ConfigError


def secret_checks(settings: Settings, environ: Mapping[str, str] | None = None) -> list[Check]:
    env = os.environ if environ is None else environ
    wanted = [
        (f"{pipeline.name}.{stage.name}", stage.secrets)
        for pipeline in settings.pipelines.values()
        for stage in pipeline.stages
        if stage.secrets
    ]
    if not wanted and settings.env_file is None:
        return []
    checks: list[Check] = []
    from_file: Mapping[str, str] = {}
    if settings.env_file is None:
        cron = "a cron tick has none of this shell's environment: set [orchestrator] env_file"
    else:
        cron = f"a cron tick looks in env_file {settings.env_file}"
        try:
            from_file = read_env_file(settings.env_file)
        except ConfigError as exc:
            checks.append(Check(Level.FAIL, "secrets", str(exc)))
    for where, names in wanted:
        missing = [name for name in names if name not in env and name not in from_file]
        shell_only = [name for name in names if name in env and name not in from_file]
        if missing:
            checks.append(
                Check(
                    Level.FAIL,
                    "secrets",
                    f"{where}: {', '.join(missing)} set in neither the environment "
                    f"nor env_file; {cron}",
                )
            )
        elif shell_only:
            checks.append(
                Check(
                    Level.WARN,
                    "secrets",
                    f"{where}: {', '.join(shell_only)} only in this shell's environment; {cron}",
                )
            )
        else:
            checks.append(
                Check(Level.OK, "secrets", f"{where}: {', '.join(names)} in {settings.env_file}")
            )
    return checks
