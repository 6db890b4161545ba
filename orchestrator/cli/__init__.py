"""The command line: parse, call the library, render. Nothing is decided here.

`cli` is the root group. Its commands are registered below by dotted path and
imported on first use (see `group.py`), so `orchestrator --help` loads no
database code and `orchestrator tick` loads only the ticking commands. To add
a command: write a click command in a module, and add one line to COMMANDS (a
feature's commands are its `Feature.commands`, added by `compose.commands`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import NoReturn

import click

from orchestrator import __version__, compose
from orchestrator.cli.app import App
from orchestrator.cli.group import OrchestratorGroup

# name -> "module:click command". One line per command, in no particular
# order (help lists them sorted).
COMMANDS: dict[str, str] = {
    "init": "orchestrator.cli.project:init",
    "demo": "orchestrator.cli.project:demo",
    "doctor": "orchestrator.cli.project:doctor",
    "cron": "orchestrator.cli.project:cron",
    "add": "orchestrator.cli.tasks:add",
    "list": "orchestrator.cli.tasks:list_",
    "show": "orchestrator.cli.tasks:show",
    "diff": "orchestrator.cli.tasks:diff",
    "halt": "orchestrator.cli.tasks:halt",
    "resume": "orchestrator.cli.tasks:resume",
    "cancel": "orchestrator.cli.tasks:cancel",
    "approve": "orchestrator.cli.gates:approve",
    "reject": "orchestrator.cli.gates:reject",
    "tick": "orchestrator.cli.ticking:tick",
    "run": "orchestrator.cli.ticking:run",
    "history": "orchestrator.cli.history:history",
    "scores": "orchestrator.cli.history:scores",
    "sql": "orchestrator.cli.history:sql",
    "verdict": "orchestrator.cli.verdict:verdict",
    "db": "orchestrator.cli.db:db",
    "serve": "orchestrator.web.command:serve",
    "report": "orchestrator.web.command:report",
    "events": "orchestrator.cli.events:events_command",
    "metrics": "orchestrator.cli.ops:metrics_command",
    "prune": "orchestrator.cli.ops:prune_command",
    "explain": "orchestrator.cli.explain:explain",
    "mcp": "orchestrator.mcp.cli:mcp_command",
    "pool": "orchestrator.cli.pools:pool",
    "pipelines": "orchestrator.cli.pipelines:pipelines",
    "restore": "orchestrator.cli.restore:restore",
    "calibrate": "orchestrator.cli.restore:calibrate",
}


@click.group(
    cls=OrchestratorGroup,
    lazy_subcommands=compose.commands(COMMANDS),
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--config",
    type=click.Path(dir_okay=False),
    envvar="ORCHESTRATOR_CONFIG",
    help="orchestrator.toml to use (default: ./orchestrator.toml).",
)
@click.option(
    "--db",
    metavar="URL",
    envvar="ORCHESTRATOR_DB_URL",
    help="Database URL; overrides the config (sqlite:///file.db, postgresql+psycopg://…).",
)
@click.option("-v", "--verbose", is_flag=True, help="On errors, show the chain of causes.")
@click.version_option(__version__, prog_name="orchestrator")
@click.pass_context
def cli(ctx: click.Context, config: str | None, db: str | None, verbose: bool) -> None:
    """A durable orchestrator for staged, verifier-gated work.

    Tasks move through a pipeline of stages; in each, a worker command does
    the work and a verifier prints a JSON verdict. Cron runs `orchestrator
    tick`; people open gates with `approve`; everything is a row in SQL.
    """
    ctx.obj = App(config=config, db=db, verbose=verbose)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Console-script entry point."""
    try:
        cli.main(args=argv, prog_name="orchestrator")
    except KeyboardInterrupt:
        click.echo("Error: interrupted", err=True)
        sys.exit(130)
    sys.exit(0)


__all__ = ["COMMANDS", "cli", "main"]
