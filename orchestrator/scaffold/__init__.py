"""`orchestrator init` and `orchestrator demo`: the two ways to start.

`init` writes a commented `orchestrator.toml` with the seeds' default
pipeline (research [gate] → implement → code_review [gate] → bug_find →
adversarial_bug_find → doc_review → referee), prompt templates and two small
judge scripts, then creates the database. The files come from
`orchestrator/templates/`, shipped in the wheel.

`demo` builds a throw-away project whose stages run the simulated agent in
`orchestrator.scaffold.demo_agent`, and drives it through every kind of outcome in a
few seconds, printing each step as the commands a person would type. It
drives a `Project`, the library face the CLI uses, under the same tick lock
a cron tick takes, so what it shows is what `orchestrator tick` does.
"""

from __future__ import annotations

from orchestrator.scaffold.cron import CRON_MARK as CRON_MARK
from orchestrator.scaffold.cron import LOG_NAME as LOG_NAME
from orchestrator.scaffold.cron import (
    cron_line,
    cron_schedule,
    edit_crontab,
    read_crontab,
    write_crontab,
)
from orchestrator.scaffold.cron import orchestrator_command as orchestrator_command
from orchestrator.scaffold.cron import shown_program as shown_program
from orchestrator.scaffold.demo import DEMO_ACTOR as DEMO_ACTOR
from orchestrator.scaffold.demo import DEMO_DIR, DEMO_TASKS, DemoResult, demo_files, run_demo
from orchestrator.scaffold.demo import REJECT_NOTE as REJECT_NOTE
from orchestrator.scaffold.demo import Demo as Demo
from orchestrator.scaffold.demo import write_demo_project as write_demo_project
from orchestrator.scaffold.init import INIT_JUDGES as INIT_JUDGES
from orchestrator.scaffold.init import INIT_PROMPTS as INIT_PROMPTS
from orchestrator.scaffold.init import InitResult, init_project, render_init_config
from orchestrator.scaffold.init import Say as Say
from orchestrator.scaffold.init import Table as Table
from orchestrator.scaffold.init import _backup as _backup
from orchestrator.scaffold.init import toml_string as toml_string

__all__ = [
    "DEMO_DIR",
    "DEMO_TASKS",
    "DemoResult",
    "InitResult",
    "cron_line",
    "cron_schedule",
    "demo_files",
    "edit_crontab",
    "init_project",
    "read_crontab",
    "render_init_config",
    "run_demo",
    "write_crontab",
]
