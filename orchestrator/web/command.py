"""`orchestrator serve` and `orchestrator report --html`, registered by cli.py.

This module imports only click and the core at import time: the web
libraries are imported when one of these commands runs, so every other
command starts without paying for them. They are core dependencies; an
install made without them (`pip install --no-deps`) is told what is missing.
"""

from __future__ import annotations

import getpass
import os
import secrets
import signal
import stat
from pathlib import Path
from types import FrameType
from typing import Any

import click

from orchestrator.errors import ConfigError, RefusedError

LOCAL_TOKEN_FILE = "web-token"  # noqa: S105 - the file's name, not a secret
TOKEN_ENV = "ORCHESTRATOR_WEB_TOKEN"  # noqa: S105 - the variable's name, not a secret
NEEDS_EXTRA = (
    "this command needs Starlette, uvicorn and Jinja2, dependencies of orchestrator "
    "that this installation lacks: install orchestrator again, without --no-deps"
)


def _require_extra() -> None:
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"{NEEDS_EXTRA} ({exc.name} is missing)") from exc


def is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name may resolve anywhere: treat it as exposed


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid:{os.getuid()}"


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port to bind."
)
@click.option(
    "--users",
    "users_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A file of `name:argon2-hash` lines; people sign in with HTTP Basic.",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"A file holding a shared access token (or set {TOKEN_ENV}).",
)
@click.option(
    "--add-user",
    metavar="NAME",
    help="Add NAME (or change its password) in the --users file, asking for the password; "
    "then exit.",
)
@click.option(
    "--page-size",
    type=click.IntRange(1, 1000),
    default=100,
    show_default=True,
    help="Tasks per board page.",
)
@click.pass_context
def serve(
    ctx: click.Context,
    host: str,
    port: int,
    users_file: Path | None,
    token_file: Path | None,
    add_user: str | None,
    page_size: int,
) -> None:
    """Serve the board, gate, task and history pages.

    Binds 127.0.0.1 unless --host says otherwise; any other address needs
    --users or a token, and the signed-in name is the approval's actor.
    Without either, every page asks for the access token kept in the state
    folder's web-token file: open the address printed at start.
    """
    _require_extra()
    from orchestrator.web.security import Auth, read_users

    if add_user is not None:
        _add_user(users_file, add_user)
        return

    token = os.environ.get(TOKEN_ENV, "").strip() or None
    if token_file is not None:
        try:
            token = token_file.read_text("utf-8").strip() or None
        except OSError as exc:
            raise ConfigError(f"{token_file}: cannot read the token ({exc.strerror})") from exc
        if token is None:
            raise ConfigError(f"{token_file}: the token file is empty")
    auth = Auth(
        users=read_users(users_file) if users_file else {}, token=token, local_actor=_login()
    )
    if not is_loopback(host) and not auth.required:
        raise RefusedError(
            f"refusing to serve on {host} without authentication: give --users FILE or "
            f"--token-file FILE (or {TOKEN_ENV}), or bind 127.0.0.1"
        )
    if token is not None and len(token) < 16:
        raise RefusedError("the token is too short: use at least 16 characters")
    import uvicorn

    from orchestrator.web.app import create_app

    app_obj = _app(ctx)
    settings = app_obj.settings()
    address = f"http://{host}:{port}/"
    if not auth.required:
        auth.local_token = local_token(settings.state_root / LOCAL_TOKEN_FILE)
        address += f"?token={auth.local_token}"
    engine = app_obj.engine(settings)
    app = create_app(engine, settings, auth, page_size)
    click.echo(f"serving on {address} (Ctrl-C stops)")
    # uvicorn shuts down gracefully on SIGTERM, then raises the signal again
    # for its default action, which would end `serve` by the signal (a
    # failure to service managers). With a handler in the default's place
    # that second raise does nothing and `serve` exits 0.
    previous = signal.signal(signal.SIGTERM, _shut_down)
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning", server_header=False)
    finally:
        signal.signal(signal.SIGTERM, previous)


def local_token(path: Path) -> str:
    """The access token `serve` without a login asks for, kept 0600 in the
    state folder (which no sandbox sees) so a restart keeps the address:
    read when there, else made. Never through a link someone planted."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            made = secrets.token_urlsafe(32)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as out:
                out.write(made + "\n")
            return made
        with os.fdopen(fd, encoding="ascii", errors="replace") as kept:
            if not stat.S_ISREG(os.fstat(kept.fileno()).st_mode):
                raise ConfigError(f"{path}: not a regular file")
            os.fchmod(kept.fileno(), 0o600)
            found = kept.read(200).strip()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot keep the access token ({exc.strerror})") from exc
    if len(found) < 32 or not found.isascii() or not found.isprintable() or " " in found:
        raise ConfigError(f"{path}: not an access token; delete it and `serve` makes a new one")
    return found


def _shut_down(_signum: int, _frame: FrameType | None) -> None:
    """uvicorn has shut down by now (see `serve`): nothing is left to do."""


def _add_user(users_file: Path | None, name: str) -> None:
    from orchestrator.web.security import hash_password, set_user

    if users_file is None:
        raise RefusedError("--add-user needs --users FILE (created when missing)")
    password = click.prompt(f"password for {name}", hide_input=True, confirmation_prompt=True)
    if len(password) < 8:
        raise RefusedError("the password is too short: use at least 8 characters")
    set_user(users_file, name, hash_password(password))
    click.echo(f"{users_file}: {name} can sign in")


@click.command()
@click.option(
    "--html",
    "html_file",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the pages into this one self-contained HTML file.",
)
@click.option(
    "--tasks",
    "task_limit",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="At most this many task pages: the board's, most recently changed first.",
)
@click.option("--task", "slugs", multiple=True, help="Only this task (repeatable).")
@click.pass_context
def report(ctx: click.Context, html_file: Path, task_limit: int, slugs: tuple[str, ...]) -> None:
    """Write the board, task and gate pages and the history to one HTML file:
    inline CSS and SVG, no script, no network (for sharing)."""
    _require_extra()
    from orchestrator.web.report import render_report

    app_obj = _app(ctx)
    settings = app_obj.settings()
    html = render_report(app_obj.engine(settings), settings, task_limit, list(slugs))
    tmp = html_file.with_name(f".{html_file.name}.tmp")
    try:
        tmp.write_text(html, "utf-8")
        tmp.replace(html_file)
    except OSError as exc:
        raise ConfigError(f"{html_file}: cannot write the report ({exc.strerror})") from exc
    from datetime import UTC, datetime

    taken = datetime.now(UTC).isoformat(timespec="seconds")
    click.echo(f"wrote {html_file} ({len(html.encode()):,} bytes, as of {taken})")


def _app(ctx: click.Context) -> Any:
    """The CLI's `App` (global --config/--db), imported late: the CLI registers us lazily."""
    from orchestrator.cli.app import App

    app = ctx.find_object(App)
    assert app is not None
    return app
