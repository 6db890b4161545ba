"""The root group: commands imported on first use, errors mapped to statuses.

A command is registered as the dotted path of a click command (`module:name`)
and imported only when something asks for it: running it, `--help` listing
it, or a test walking `cli.commands`. So `orchestrator tick` never imports
the modules of `show` or `db`, and a tick that finds the lock busy stays
fast. This is the lazy group of click's documentation, with the registry
kept as the group's own `commands` mapping so that click (and everything
that reads `group.commands`) sees every command, loaded or not.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

import click

from orchestrator.errors import OrchestratorError


class LazyCommands(MutableMapping[str, click.Command]):
    """Command name -> command, importing `module:attribute` at first lookup."""

    def __init__(self, lazy: Mapping[str, str]) -> None:
        self._lazy = dict(lazy)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            where = self._lazy[name]  # KeyError: no such command
            module, _, attribute = where.partition(":")
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{where} is not a click command")
            self._loaded[name] = command
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command
        self._lazy.pop(name, None)

    def __delitem__(self, name: str) -> None:
        if name not in self._loaded and name not in self._lazy:
            raise KeyError(name)
        self._loaded.pop(name, None)
        self._lazy.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        yield from self._loaded
        yield from (name for name in self._lazy if name not in self._loaded)

    def __len__(self) -> int:
        return len(self._loaded.keys() | self._lazy.keys())

    def __contains__(self, name: object) -> bool:
        return name in self._loaded or name in self._lazy


class CliError(click.ClickException):
    """An OrchestratorError on its way out: `Error: …` and its exit status."""

    def __init__(self, error: OrchestratorError, verbose: bool, stamped: bool = False) -> None:
        super().__init__(str(error))
        # click reads exit_code per instance; ours varies with the error.
        self.exit_code = error.exit_code  # type: ignore[misc]
        self.error = error
        self.verbose = verbose
        self.stamped = stamped

    def show(self, file: Any = None) -> None:
        from orchestrator.cli.output import now

        stream = file if file is not None else sys.stderr
        if not self.message:
            return  # said already, line by line (a tick's errors)
        prefix = f"{now()} " if self.stamped else ""
        click.echo(f"{prefix}Error: {self.message}", file=stream)
        if self.verbose:
            cause = self.error.__cause__ or self.error.__context__
            while cause is not None:
                click.echo(f"  caused by {type(cause).__name__}: {cause}", file=stream)
                cause = cause.__cause__ or cause.__context__


class OrchestratorGroup(click.Group):
    """The root group: its subcommands come from a `{name: "module:attribute"}`
    registry it holds (`LazyCommands`, imported on first lookup), and our
    errors become exit statuses here, in one place."""

    def __init__(self, *args: Any, lazy_subcommands: Mapping[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        commands = LazyCommands(lazy_subcommands)
        for name, command in self.commands.items():  # any given eagerly
            commands[name] = command
        self.commands = commands

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OrchestratorError as error:
            raise CliError(error, _flag(ctx, "verbose"), _flag(ctx, "stamped")) from error
        except Exception as error:
            from orchestrator.storage.driver_errors import translate

            mapped = translate(error)
            if mapped is None:
                raise
            raise CliError(mapped, _flag(ctx, "verbose"), _flag(ctx, "stamped")) from error


def _flag(ctx: click.Context, name: str) -> bool:
    """`App.verbose` or `App.stamped`, False before the App exists."""
    from orchestrator.cli.app import App

    obj = ctx.find_object(App)
    return bool(obj and getattr(obj, name))
