"""`run_doctor`: every family of checks, in the order the CLI prints them.

The configuration is loaded first: when it cannot be, nothing else can be
checked, and the report says so with exit 78.
"""

from __future__ import annotations

from orchestrator.config import Settings, load_settings
from orchestrator.doctor.commands import _command_checks, _judge_checks, _prompt_checks
from orchestrator.doctor.database import _database_checks
from orchestrator.doctor.folders import _folder_checks, _lock_checks
from orchestrator.doctor.landing import land_checks
from orchestrator.doctor.report import Check, DoctorReport, Level
from orchestrator.doctor.sandbox import sandbox_checks
from orchestrator.doctor.secrets import secret_checks
from orchestrator.errors import OrchestratorError


def run_doctor(config: str | None, db_url: str | None) -> DoctorReport:
    """Run every check; never raises for a problem it can report."""
    try:
        settings = load_settings(config=config, db_url=db_url, require_config=True)
    except OrchestratorError as exc:
        return DoctorReport((Check(Level.FAIL, "config", str(exc)),), config_loaded=False)
    checks = [Check(Level.OK, "config", _describe_config(settings))]
    checks += _database_checks(settings)
    checks += _lock_checks(settings)
    checks += _folder_checks(settings)
    checks += _command_checks(settings)
    checks += _prompt_checks(settings)
    checks += _judge_checks(settings)
    checks += secret_checks(settings)
    checks += land_checks(settings)
    checks += sandbox_checks(settings)
    from orchestrator.doctor.agents import agent_checks, lenient_judge_checks

    checks += agent_checks(settings)
    checks += lenient_judge_checks(settings)
    return DoctorReport(tuple(checks), config_loaded=True)


def _describe_config(settings: Settings) -> str:
    stages = sum(len(p.stages) for p in settings.pipelines.values())
    pipelines = len(settings.pipelines)
    return (
        f"{settings.config_path} ({pipelines} pipeline{'s' * (pipelines != 1)}, "
        f"{stages} stage{'s' * (stages != 1)})"
    )
