"""The command line: parse, call, render. Exit statuses are decided here only.

Imports are lazy on purpose: a tick that finds the lock busy must exit in a
fraction of the time a tick that opens the database takes, so
SQLAlchemy is imported only after the lock is ours, by the commands that
need it.
"""

from __future__ import annotations

import csv
import getpass
import io
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from orchestrator import __version__
from orchestrator.config import Settings, load_settings
from orchestrator.errors import (
    ConnectionLostError,
    Interrupted,
    LockBusyError,
    NoVerdictError,
    OrchestratorError,
    RefusedError,
    TickFailedError,
)

if TYPE_CHECKING:
    from sqlalchemy import Engine


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
        stream = file if file is not None else sys.stderr
        if not self.message:
            return  # said already, line by line (a tick's errors)
        prefix = f"{_now()} " if self.stamped else ""
        click.echo(f"{prefix}Error: {self.message}", file=stream)
        if self.verbose:
            cause = self.error.__cause__ or self.error.__context__
            while cause is not None:
                click.echo(f"  caused by {type(cause).__name__}: {cause}", file=stream)
                cause = cause.__cause__ or cause.__context__


@dataclass
class App:
    config: str | None
    db: str | None
    verbose: bool
    _settings: Settings | None = None
    # `tick -q`/`run -q` write a log (cron appends it to a file): every line,
    # errors included, starts with the time.
    stamped: bool = False

    def settings(self, *, require_config: bool = False) -> Settings:
        """The settings; without a config only when --db names the database.

        A folder with no config would otherwise send a newcomer to a database
        that does not exist, and `db upgrade` would create a stray one there.
        """
        require_config = require_config or not self.db
        if self._settings is None or (require_config and self._settings.config_path is None):
            self._settings = load_settings(
                config=self.config, db_url=self.db, require_config=require_config
            )
        return self._settings

    def engine(
        self,
        settings: Settings | None = None,
        *,
        check: bool = True,
        owned: bool = False,
        jobs: int = 1,
    ) -> Engine:
        """Open the database, refusing (78) a missing file or a schema not at head.

        The engine is disposed when the command ends, unless `owned`: then the
        caller disposes it (`run` opens one per tick and must not pile them up).
        """
        from orchestrator.storage.db import make_engine, read_tx
        from orchestrator.storage.schema import require_head

        settings = settings or self.settings()
        engine = make_engine(settings.database_url, busy_timeout=settings.busy_timeout, jobs=jobs)
        if not owned:
            click.get_current_context().call_on_close(engine.dispose)
        if check:
            try:
                with read_tx(engine) as conn:  # no write lock just to look
                    require_head(conn)
            except BaseException:
                if owned:  # nobody else will dispose it: the caller never got it
                    engine.dispose()
                raise
        return engine


class OrchestratorGroup(click.Group):
    """Turns our errors into exit statuses, in one place."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OrchestratorError as error:
            raise CliError(error, _verbose(ctx), _stamped(ctx)) from error
        except Exception as error:
            from orchestrator.storage.db import translate

            mapped = translate(error)
            if mapped is None:
                raise
            raise CliError(mapped, _verbose(ctx), _stamped(ctx)) from error


def _verbose(ctx: click.Context) -> bool:
    obj = ctx.find_object(App)
    return bool(obj and obj.verbose)


def _stamped(ctx: click.Context) -> bool:
    obj = ctx.find_object(App)
    return bool(obj and obj.stamped)


def _now() -> str:
    """The local-independent time a log line starts with: ISO 8601, UTC, seconds."""
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="seconds")


pass_app = click.make_pass_decorator(App)


@click.group(cls=OrchestratorGroup, context_settings={"help_option_names": ["-h", "--help"]})
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


# -- rendering -------------------------------------------------------------------


def _emit_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str) -> None:
    if fmt == "json":
        click.echo(
            json.dumps(
                [dict(zip(columns, row, strict=True)) for row in rows],
                indent=2,
                default=str,
                ensure_ascii=False,
            )
        )
    elif fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
        click.echo(buffer.getvalue(), nl=False)
    else:
        click.echo(_table(columns, rows))


MIN_COLUMN = 8
KEEP_WHOLE = 32  # a column this narrow is a time, a state or a slug: cut last


def _table(columns: Sequence[str], rows: Sequence[Sequence[Any]], width: int | None = None) -> str:
    """Aligned columns. Piped or redirected (`width` None off a terminal),
    nothing is cut: a plateau reason that loses its numbers is worse than a
    long line. On a terminal the long text columns shrink first, so times,
    states and slugs stay whole, and a cut cell ends with `…`. Widths are
    what a terminal shows (a CJK character takes two columns)."""

    def cell(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, float):
            return f"{value:.2f}"
        return _printable(str(value))

    if width is None and sys.stdout.isatty():
        import shutil

        width = shutil.get_terminal_size().columns
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([_width(c)] + [_width(r[i]) for r in cells]) for i, c in enumerate(columns)]
    if width is not None:
        widths = _fit(widths, width - 2 * (len(columns) - 1))

    def line(values: Sequence[str]) -> str:
        return "  ".join(_pad(v, w) for v, w in zip(values, widths, strict=True)).rstrip()

    return "\n".join([line(columns)] + [line(r) for r in cells])


def _printable(text: str) -> str:
    """Text as a terminal should show it: what an agent or a title carries
    (escape sequences, bidi overrides, tabs, newlines) never drives the
    terminal; each such character becomes a space or `?`."""
    import unicodedata

    out = []
    for char in text:
        if char in "\t\r\n":
            out.append(" ")
        elif unicodedata.category(char) in ("Cc", "Cf", "Cs"):
            out.append("?")
        else:
            out.append(char)
    return "".join(out)


def _width(text: str) -> int:
    import unicodedata

    return sum(
        0
        if unicodedata.combining(char)
        else 2
        if unicodedata.east_asian_width(char) in ("W", "F")
        else 1
        for char in text
    )


def _pad(text: str, width: int) -> str:
    """`text` cut to `width` terminal columns (ending with `…` when cut), padded."""
    if _width(text) > width:
        kept, used = [], 0
        for char in text:
            size = _width(char)
            if used + size > max(0, width - 1):
                break
            kept.append(char)
            used += size
        text = "".join(kept) + "…"
    return text + " " * max(0, width - _width(text))


def _fit(widths: list[int], room: int) -> list[int]:
    """Shrink the long columns (wider than KEEP_WHOLE: reasons, notes, titles)
    to one common width that lets the row fit `room`, keeping the short ones
    (times, states, slugs) whole; only when that cannot fit do all shrink.
    Never below MIN_COLUMN (then the terminal wraps)."""
    if sum(widths) <= room:
        return widths
    short = sum(w for w in widths if w <= KEEP_WHOLE)
    long = [w for w in widths if w > KEEP_WHOLE]
    if long and short + MIN_COLUMN * len(long) <= room:
        cap = _cap(long, room - short)
        return [w if w <= KEEP_WHOLE else min(w, cap) for w in widths]
    cap = _cap(widths, room)
    return [min(w, cap) for w in widths]


def _cap(widths: list[int], room: int) -> int:
    """The largest common cap (at least MIN_COLUMN) under which `widths` fit `room`."""
    low, high = MIN_COLUMN, max(widths)
    while low < high:
        cap = (low + high + 1) // 2
        if sum(min(w, cap) for w in widths) <= room:
            low = cap
        else:
            high = cap - 1
    return low


def _format_options(csv_ok: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        if csv_ok:
            f = click.option("--csv", "fmt", flag_value="csv", help="Print CSV with a header row.")(
                f
            )
        json_flag = click.option(
            "--json", "fmt", flag_value="json", help="Print a JSON list of objects, for scripts."
        )
        return json_flag(f)

    return decorate


def _actor(by: str | None) -> str:
    if by:
        return by
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid:{os.getuid()}"


def _human_only() -> None:
    """An agent must not approve its own gate: its environment names its task."""
    if os.environ.get("ORCHESTRATOR_TASK"):
        raise RefusedError(
            "refusing a human command from inside an attempt (ORCHESTRATOR_TASK is set)"
        )


# -- verdict -------------------------------------------------------------------


@cli.command()
@click.argument("source", default="-", metavar="[FILE | -]")
def verdict(source: str) -> None:
    """Print the normalized verdict found in FILE (or stdin) as JSON.

    Applies exactly the rules the tick uses, so you can check what a verifier's
    output would count as. The rule: text that is one JSON object is the
    verdict; otherwise, among ```json fenced blocks and top-level {...} spans,
    the one written last that has a "pass" or "score" key; when no object has
    either, the last fenced object, else the last one. Exits 65 when the text
    holds no verdict.
    """
    from orchestrator.domain.verdict import parse_verdict

    if source == "-":
        data = sys.stdin.buffer.read()
    else:
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise RefusedError(f"cannot read {source}: {exc.strerror}") from exc
    found = parse_verdict(data.decode("utf-8", errors="replace"))
    if found is None:
        raise NoVerdictError("no JSON verdict found in the input")
    click.echo(json.dumps(found.to_dict(), ensure_ascii=False))


# -- database --------------------------------------------------------------------


@cli.group()
def db() -> None:
    """Create, migrate and inspect the database schema."""


@db.command("upgrade")
@click.argument("revision", default="head")
@click.option("--force", is_flag=True, help="Upgrade even while a tick runs (not advised).")
@pass_app
def db_upgrade(app: App, revision: str, force: bool) -> None:
    """Create the database or migrate it to REVISION (default: head).

    Refuses (exit 75) while a tick holds the lock or attempts are unfinished,
    since running code would meet a schema it does not know.
    """
    from orchestrator.storage import migrate
    from orchestrator.storage.db import make_engine, sqlite_path

    settings = app.settings()
    file = sqlite_path(settings.database_url)
    created = file is not None and not file.exists()
    engine = make_engine(settings.database_url, busy_timeout=settings.busy_timeout, create=True)
    click.get_current_context().call_on_close(engine.dispose)
    with _quiesced(settings, engine, force):
        before = migrate.current(engine)
        migrate.upgrade(engine, revision)
        after = migrate.current(engine)
    change = "created" if created else "" if before == after else f"was {before or 'empty'}"
    click.echo(f"database at {after}" + (f" ({change})" if change else ""))


@db.command("downgrade")
@click.argument("revision")
@click.option("--force", is_flag=True, help="Downgrade even while a tick runs (not advised).")
@pass_app
def db_downgrade(app: App, revision: str, force: bool) -> None:
    """Migrate the database back to REVISION (`base` removes every table)."""
    from orchestrator.storage import migrate

    settings = app.settings()
    engine = app.engine(settings, check=False)
    with _quiesced(settings, engine, force):
        migrate.downgrade(engine, revision)
        click.echo(f"database at {migrate.current(engine) or 'base'}")


@db.command("current")
@pass_app
def db_current(app: App) -> None:
    """Print the schema revision of the database and of this code."""
    from orchestrator.storage import migrate
    from orchestrator.storage.schema import HEAD

    engine = app.engine(check=False)
    click.echo(f"database: {migrate.current(engine) or 'empty'}\ncode:     {HEAD}")


@contextmanager
def _quiesced(settings: Settings, engine: Engine, force: bool) -> Iterator[None]:
    """Hold the tick lock and require no unfinished attempts, unless forced."""
    from orchestrator.locking import TickLock

    lock = TickLock(settings.lock_file)
    if force:
        yield
        return
    lock.acquire()
    try:
        from sqlalchemy import inspect

        from orchestrator.storage import repo
        from orchestrator.storage.db import read_tx

        if inspect(engine).has_table("attempts"):
            with read_tx(engine) as conn:
                if repo.unfinished_attempts(conn):
                    raise LockBusyError("attempts are still running; wait for them or pass --force")
        yield
    finally:
        lock.release()


# -- tasks -----------------------------------------------------------------------


@cli.command()
@click.argument("slug", required=False)
@click.option("--title", help="One line saying what the task is.")
@click.option(
    "--pipeline", default="default", show_default=True, help="Pipeline to run it through."
)
@click.option("--priority", type=int, default=0, show_default=True, help="Higher runs first.")
@click.option("--body", help="The full description handed to agents (prompt {body}).")
@click.option(
    "--body-file", type=click.Path(dir_okay=False, exists=True), help="Read the body from a file."
)
@click.option(
    "--from",
    "from_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Add tasks from JSON lines (slug, title, pipeline, priority, body) in one transaction.",
)
@pass_app
def add(
    app: App,
    slug: str | None,
    title: str | None,
    pipeline: str,
    priority: int,
    body: str | None,
    body_file: str | None,
    from_file: str | None,
) -> None:
    """Add a task at the first stage of its pipeline.

    SLUG names the task and its workspace folder: 1-63 characters of a-z 0-9 . _ -.
    """
    from orchestrator.actions import TaskSpec, add_tasks

    if from_file is not None:
        if slug or title:
            raise click.UsageError("--from cannot be combined with SLUG or --title")
        specs = _read_specs(from_file)
    else:
        if slug is None or title is None:
            raise click.UsageError("give SLUG and --title (or --from FILE)")
        if body is not None and body_file is not None:
            raise click.UsageError("give --body or --body-file, not both")
        if body_file is not None:
            body = Path(body_file).read_text(encoding="utf-8", errors="replace")
        specs = [TaskSpec(slug, title, pipeline, priority, body or "")]
    settings = app.settings()
    engine = app.engine(settings)
    _refuse_old_state(engine, settings, specs)
    count = add_tasks(engine, settings, specs, _actor(None))
    names = ", ".join(spec.slug for spec in specs[:20])
    more = f" and {count - 20} more" if count > 20 else ""
    click.echo(f"added {specs[0].slug}" if count == 1 else f"added {count} tasks: {names}{more}")
    for spec in specs:
        if isinstance(spec.slug, str) and (settings.workspace_root / spec.slug).exists():
            click.echo(
                f"note: {spec.slug}: workspace {_shown_path(settings.workspace_root / spec.slug)}"
                " exists and is reused as it is (a pipeline's setup will not run)",
                err=True,
            )


def _refuse_old_state(engine: Engine, settings: Settings, specs: Sequence[Any]) -> None:
    """A slug used before (a database made afresh) would write its attempts'
    output over the old task's files in `state/<slug>/<stage>-001/`."""
    from orchestrator.domain.slug import slug_problem
    from orchestrator.storage import repo
    from orchestrator.storage.db import read_tx

    slugs = [s.slug for s in specs if isinstance(s.slug, str) and slug_problem(s.slug) is None]
    with read_tx(engine) as conn:
        taken = repo.existing_slugs(conn, slugs)  # add_tasks says "already exists"
    for spec in specs:
        if spec.slug not in slugs or spec.slug in taken:
            continue
        old = settings.state_root / spec.slug
        if os.path.lexists(old):  # a dangling link is a leftover too
            raise RefusedError(
                f"{spec.slug}: {_shown_path(old)} holds the output of an earlier task named "
                f"{spec.slug!r}, which its attempts would overwrite; move it away or "
                "pick another slug"
            )


def _read_specs(source: str) -> list[Any]:
    from orchestrator.actions import TaskSpec
    from orchestrator.domain.slug import slug_problem

    stream = sys.stdin if source == "-" else None
    try:
        text = stream.read() if stream else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise RefusedError(f"cannot read {source}: {exc.strerror}") from exc
    specs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if not isinstance(item, dict):
                raise TypeError("not an object")
            unknown = set(item) - {"slug", "title", "pipeline", "priority", "body"}
            if unknown:
                raise TypeError(f"unknown field {sorted(unknown)[0]!r}")
            problem = slug_problem(item["slug"]) if isinstance(item.get("slug"), str) else None
            if problem is not None:
                raise ValueError(f"slug {item['slug']!r}: {problem}")
            specs.append(
                TaskSpec(
                    slug=item["slug"],
                    title=item["title"],
                    pipeline=item.get("pipeline", "default"),
                    priority=item.get("priority", 0),
                    body=item.get("body", ""),
                )
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise RefusedError(f"{source} line {number}: {exc}") from None
        if not all(isinstance(v, str) for v in (item["slug"], item["title"], item.get("body", ""))):
            raise RefusedError(f"{source} line {number}: slug, title and body must be strings")
    if not specs:
        raise RefusedError(f"{source} holds no tasks")
    return specs


@cli.command("list")
@click.option(
    "--state",
    help="Only tasks in this state (`implement`, `research:halted`) or status (`halted`).",
)
@_format_options(csv_ok=True)
@pass_app
def list_(app: App, state: str | None, fmt: str | None) -> None:
    """List tasks with their state, attempts at this stage and last score."""
    from orchestrator.reports import list_tasks

    settings = app.settings()
    stages = {s.name for p in settings.pipelines.values() for s in p.stages}
    rows = list_tasks(app.engine(settings), state, stages)
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    columns = ["slug", "state", "attempt", "score", "halt_reason", "title"]
    _emit_rows(columns, [[r[c] for c in columns] for r in rows], fmt or "table")


@cli.command()
@click.argument("slug")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the task, its transitions and attempts as JSON."
)
@pass_app
def show(app: App, slug: str, as_json: bool) -> None:
    """Show one task: its state, transitions and attempts, oldest first."""
    from orchestrator.reports import show_task

    settings = app.settings()
    data = show_task(app.engine(settings), slug, settings.state_root)
    if as_json:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    click.echo(f"{data['slug']}: {_printable(data['title'])}")
    click.echo(
        f"  state     {data['state']}"
        + (f" ({data['halt_reason']})" if data["halt_reason"] else "")
    )
    click.echo(f"  pipeline  {data['pipeline']}   priority {data['priority']}")
    if data["next_hint"]:
        click.echo(f"  next hint {_printable(data['next_hint'][:200])}")
    click.echo("\ntransitions:")
    click.echo(
        _table(
            ["seq", "at", "from", "to", "actor", "reason / note"],
            [
                [
                    t["seq"],
                    _time(t["at"]),
                    t["from_state"],
                    t["to_state"],
                    t["actor"],
                    _reason_and_note(t["reason"], t["note"]),
                ]
                for t in data["transitions"]
            ],
        )
    )
    if data["attempts"]:
        click.echo("\nattempts:")
        click.echo(
            _table(
                ["stage", "n", "outcome", "pass", "score", "error / next hint"],
                [
                    [
                        a["stage"],
                        a["number"],
                        a["outcome"] or "running",
                        a["pass"],
                        a["score"],
                        a["error"] or a["next_hint"],
                    ]
                    for a in data["attempts"]
                ],
            )
        )
        last = data["attempts"][-1]
        click.echo(
            f"\noutput of attempt {last['stage']} {last['number']}: "
            f"{_shown_path(Path(last['state_dir']))}/ (worker.out, worker.err, verifier.out, "
            "verifier.err, prompt.md, context.json; the other attempts' folders are beside it)"
        )


def _reason_and_note(reason: str | None, note: str | None) -> str:
    """A person's note is what a reader looks for; the tick's reason alone hid it."""
    if reason and note:
        return f"{reason}; note: {note}"
    return reason or (f"note: {note}" if note else "")


def _time(value: str | None) -> str:
    """One time format for tables (`show`, `history`): UTC to the second, as
    `YYYY-MM-DD HH:MM:SS`; JSON and CSV keep the stored precision."""
    if not value:
        return ""
    return value.replace("T", " ")[:19]


def _human_command(name: str, doc: str, note_required: bool = False) -> None:
    """Register the command `name`, which calls `orchestrator.actions.<name>`
    (imported when it runs: the action module imports SQLAlchemy)."""

    @click.argument("slug")
    @click.option("--by", metavar="NAME", help="Who is acting (default: the login name).")
    @click.option("--note", required=note_required, help="Why; stored on the transition.")
    @pass_app
    def command(app: App, slug: str, by: str | None, note: str | None) -> None:
        from orchestrator import actions

        _human_only()
        result = getattr(actions, name)(app.engine(), slug, _actor(by), note)
        click.echo(result.message)

    command.__doc__ = doc
    cli.command(name)(command)


_human_command(
    "approve",
    """Open a gate: SLUG moves from STAGE:awaiting_approval to STAGE:approved.

    The next tick moves it to the next stage. Approving again is harmless.
    """,
)
_human_command(
    "reject",
    """Send a gate back: SLUG runs its stage again with --note as the hint.

    The note reaches the next attempt as ORCHESTRATOR_NEXT_HINT and {hint}.
    """,
    note_required=True,
)
_human_command(
    "halt",
    """Stop SLUG where it is (halt_reason manual); a running attempt stops within seconds.""",
)
_human_command(
    "resume",
    """Make a halted SLUG ready again at its stage, with a fresh plateau window.""",
)
_human_command(
    "cancel",
    """End SLUG for good (terminal); a running attempt stops within seconds.""",
)


@cli.command()
@click.argument("slug", required=False)
@click.option(
    "--limit", type=click.IntRange(min=1), help="Only the newest N rows (printed oldest first)."
)
@_format_options()
@pass_app
def history(app: App, slug: str | None, limit: int | None, fmt: str | None) -> None:
    """Print transitions, oldest first: every task, or SLUG's."""
    from orchestrator.reports import history as fetch

    rows = fetch(app.engine(), slug, limit)
    columns = ["task", "seq", "at", "from_state", "to_state", "event", "actor", "reason", "note"]
    if fmt is None:
        rows = [{**r, "at": _time(r["at"])} for r in rows]
    _emit_rows(columns, [[r[c] for c in columns] for r in rows], fmt or "table")


@cli.command()
@click.argument("slug")
@click.option("--stage", help="Only this stage.")
@_format_options()
@pass_app
def scores(app: App, slug: str, stage: str | None, fmt: str | None) -> None:
    """Print SLUG's score history: one row per attempt with a valid verdict."""
    from orchestrator.reports import scores as fetch

    settings = app.settings()
    stages = {s.name for p in settings.pipelines.values() for s in p.stages}
    rows = fetch(app.engine(settings), slug, stage, stages)
    columns = ["stage", "attempt", "score", "pass", "at"]
    table = [[r[c] for c in columns] for r in rows]
    if not fmt:  # the one time format of tables; JSON and CSV keep the full ISO time
        table = [[*row[:-1], _time(row[-1])] for row in table]
    _emit_rows(columns, table, fmt or "table")


@cli.command()
@click.argument("query")
@_format_options()
@pass_app
def sql(app: App, query: str, fmt: str | None) -> None:
    """Run one read-only SQL QUERY against the history.

    Tables: tasks, attempts, transitions, ticks; views: task_states,
    score_history, timeline (README, "SQL schema"). The database refuses
    writes; a bad query exits 1.
    """
    from orchestrator.reports import run_sql

    columns, rows = run_sql(app.engine(), query)
    _emit_rows(columns, rows, fmt or "table")


# -- tick and run ------------------------------------------------------------------


def _tick_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--max-tasks", type=click.IntRange(min=1), help="Claim at most N attempts."),
        click.option(
            "--max-seconds",
            type=click.FloatRange(min=0),
            help="Stop claiming after S seconds (running attempts finish).",
        ),
        click.option(
            "--jobs",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            help="Attempts to run side by side.",
        ),
        click.option(
            "--task",
            "only",
            metavar="SLUG",
            help="Claim only this task (recovery still covers all).",
        ),
        click.option(
            "-q",
            "--quiet",
            is_flag=True,
            help="For cron: nothing for a busy lock or an idle tick; else one "
            "timestamped line per attempt result or state change.",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@contextmanager
def _signals_to(stop: threading.Event) -> Iterator[list[int]]:
    """SIGTERM/SIGINT set `stop` instead of killing us mid-write: the running
    attempts then stop their process groups and are recorded `interrupted`."""
    received: list[int] = []

    def handler(signum: int, _frame: Any) -> None:
        received.append(signum)
        stop.set()

    previous = {}
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, handler)
    try:
        yield received
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _run_one_tick(
    app: App,
    settings: Settings,
    stop: threading.Event,
    received: list[int],
    options: dict[str, Any],
    *,
    quiet: bool,
    stop_is_clean: bool = False,
) -> None:
    """One tick under the lock, with `options` for `TickOptions` (built here:
    the engine module imports SQLAlchemy, which the busy-lock path must not).
    A signal exits 130/143 after the attempts it
    stopped are recorded; with `stop_is_clean` (`run`), a signal that stopped
    no attempt (it came while the tick was idle) just ends the loop."""
    from orchestrator.engine import Ticker, TickOptions

    # Quiet (cron) still logs what happened, one stamped line per attempt
    # result, state change or recovery; a tick that did nothing says nothing.
    say: Callable[[str], None] = (
        (lambda line: click.echo(f"{_now()} {line}")) if quiet else click.echo
    )

    def warn(line: str) -> None:  # errors the tick survived: stderr, quiet or not
        click.echo(f"{_now() + ' ' if quiet else ''}Error: {line}", err=True)

    # One engine per tick, disposed at its end: `run` ticks for days, and a
    # pool per tick left open would hold PostgreSQL connections until it dies.
    engine = app.engine(settings, owned=True, jobs=options.get("jobs", 1))
    try:
        if options.get("task") is not None:
            _require_task(engine, options["task"])
        ticker = Ticker(settings, engine, stop=stop, say=say, warn=warn)
        report = ticker.tick(TickOptions(**options))
        interrupted = report.outcomes.get("interrupted", 0) > 0
        if received and (interrupted or not stop_is_clean):
            ticker.finish(128 + received[0])
            raise Interrupted(received[0])
    finally:
        engine.dispose()
    if report.did_work and not quiet:
        outcomes = ", ".join(f"{n} {k}" for k, n in sorted(report.outcomes.items()))
        click.echo(
            f"tick: {report.claimed} attempts"
            + (f" ({outcomes})" if outcomes else "")
            + f", {report.advanced} advanced, {report.recovered} recovered, {report.halted} halted"
            + (f"; stopped claiming: {report.stopped_claiming}" if report.stopped_claiming else "")
        )
    if report.errors:
        raise TickFailedError("", report.exit_code)  # each error is on stderr already


def _require_task(engine: Engine, slug: str) -> None:
    """`tick --task fix-clac` must not be a silent tick that did nothing."""
    from orchestrator.storage.db import read_tx
    from orchestrator.suggest import require_task

    with read_tx(engine) as conn:
        require_task(conn, slug)


@cli.command()
@_tick_options
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=0,
    help="Wait up to S seconds for the lock instead of exiting 75.",
)
@click.option(
    "--dry-run", is_flag=True, help="Print what each task would do and why; write nothing."
)
@pass_app
def tick(
    app: App,
    max_tasks: int | None,
    max_seconds: float | None,
    jobs: int,
    only: str | None,
    quiet: bool,
    wait: float,
    dry_run: bool,
) -> None:
    """Advance every task one step: recover, move approved gates on, run attempts.

    Run it from cron. A tick that finds another holding the host lock exits 75
    at once (silently with --quiet); SIGTERM/SIGINT stop the running attempts,
    record them `interrupted` and exit 143/130.
    """
    from orchestrator.locking import TickLock

    app.stamped = quiet
    settings = app.settings(require_config=True)
    lock = TickLock(settings.lock_file)
    try:
        lock.acquire(wait)
    except LockBusyError:
        if quiet:
            sys.exit(75)
        raise
    stop = threading.Event()
    try:
        with _signals_to(stop) as received:
            options: dict[str, Any] = {"max_tasks": max_tasks, "max_seconds": max_seconds}
            options.update(jobs=jobs, task=only, dry_run=dry_run)
            _run_one_tick(app, settings, stop, received, options, quiet=quiet)
    finally:
        lock.release()


@cli.command()
@_tick_options
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=60,
    show_default=True,
    help="Seconds between ticks.",
)
@pass_app
def run(
    app: App,
    max_tasks: int | None,
    max_seconds: float | None,
    jobs: int,
    only: str | None,
    quiet: bool,
    interval: float,
) -> None:
    """Tick forever, every --interval seconds (a foreground alternative to cron).

    Takes the same host lock for each tick, so cron ticks and `run` never
    overlap. SIGTERM (or SIGINT) while no attempt runs exits 0; while
    attempts run it stops them like `tick` does and exits 143 (130).
    """
    from orchestrator.locking import TickLock

    app.stamped = quiet
    stop = threading.Event()
    options: dict[str, Any] = {"max_tasks": max_tasks, "max_seconds": max_seconds}
    options.update(jobs=jobs, task=only)
    with _signals_to(stop) as received:
        while not stop.is_set():
            settings = load_settings(config=app.config, db_url=app.db, require_config=True)
            lock = TickLock(settings.lock_file)
            try:
                lock.acquire()
            except LockBusyError as busy:
                if not quiet:
                    click.echo(f"run: {busy}; skipping this round", err=True)
            else:
                try:
                    _run_one_tick(
                        app, settings, stop, received, options, quiet=quiet, stop_is_clean=True
                    )
                except TickFailedError:
                    pass  # each error is on stderr already; the next tick goes on
                except ConnectionLostError as lost:
                    # The database is down past the tick's reconnect bound: a
                    # daemon waits it out, tick after tick, rather than die.
                    click.echo(f"Error: {lost}", err=True)
                finally:
                    lock.release()
            stop.wait(interval)


# -- getting started: init, demo, doctor, cron -------------------------------------


@cli.command()
@click.option(
    "--force",
    is_flag=True,
    help="Replace an existing orchestrator.toml, saved as .bak (prompts and judges are kept).",
)
@pass_app
def init(app: App, force: bool) -> None:
    """Start a project: config, prompts, judges, database.

    Writes orchestrator.toml (or the --config path) with the default pipeline
    research [gate] -> implement -> code_review [gate] -> bug_find ->
    adversarial_bug_find -> doc_review -> referee, whose stages are recipes to
    edit (`claude -p`, `codex exec -`, a pytest judge in judges/), prompt
    templates in prompts/, then creates the database (--db, ORCHESTRATOR_DB_URL
    or the config's). Refuses (exit 1) to overwrite a config without --force.
    """
    from orchestrator.scaffold import init_project

    path = Path(app.config) if app.config else Path.cwd() / "orchestrator.toml"
    result = init_project(path, force=force, db_url=app.db)
    for written in result.written:
        click.echo(f"wrote {_shown_path(written)}")
    for kept in result.kept:
        click.echo(f"kept  {_shown_path(kept)} (exists)")
    if result.backup is not None:
        click.echo(f"saved {_shown_path(result.backup)} (the config --force replaced)")
    change = "created" if result.revision_before is None else f"was {result.revision_before}"
    click.echo(f"database at {result.revision} ({change}): {_shown_url(result.settings)}")
    click.echo(
        "next: edit the stage commands and prompts, then run `orchestrator doctor`,\n"
        "      `orchestrator add my-task --title '...' --body-file spec.md`,\n"
        "      and `orchestrator cron --install` to tick it from your crontab."
    )


@cli.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default="orchestrator-demo",
    show_default=True,
    help="Folder to build the demo project in (created if missing).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Use a non-empty --dir anyway, replacing only the demo's own files in it.",
)
def demo(directory: Path, force: bool) -> None:
    """Watch a simulated project run (no network, no keys).

    Builds a project in --dir whose stages run a simulated agent and verifier,
    adds four tasks and ticks until they settle, printing each step as the
    command a person would type: a gate approved, a gate rejected with a note
    that reaches the agent, a task halted as score_plateau, tasks reaching
    complete; then the status table and SQL on the score_history and timeline
    views. Ignores --config and --db: the demo has its own database.
    """
    from orchestrator.scaffold import run_demo

    run_demo(directory, force=force, say=click.echo, table=_table)


@cli.command()
@pass_app
def doctor(app: App) -> None:
    """Check config, database, lock, commands and prompts.

    Prints one line per check (ok, warn or fail) with its detail. Exits 0 when
    no check failed (warnings allowed), 1 when one failed, 78 when the config
    cannot be loaded. Changes nothing; it takes the tick lock for an instant
    to learn whether a tick holds it.
    """
    from orchestrator.doctor import run_doctor

    report = run_doctor(app.config, app.db)
    for check in report.checks:
        click.echo(f"{check.level.value:<5} {check.name:<10} {check.detail}")
    failed = sum(1 for c in report.checks if c.level.value == "fail")
    warned = sum(1 for c in report.checks if c.level.value == "warn")
    click.echo(f"{failed} failed, {warned} warnings")
    click.get_current_context().exit(report.exit_code)


@cli.command()
@click.option(
    "--every",
    type=click.IntRange(min=1, max=1440),
    default=1,
    show_default=True,
    metavar="MINUTES",
    help="How often to tick: 1-59 minutes, or whole hours that divide a day (60, 120, ...).",
)
@click.option(
    "--install", is_flag=True, help="Put the line in your crontab (replacing this project's)."
)
@click.option("--uninstall", is_flag=True, help="Remove this project's line from your crontab.")
@pass_app
def cron(app: App, every: int, install: bool, uninstall: bool) -> None:
    """Print a crontab line that ticks this project, or install it.

    The line uses absolute paths (this Python's orchestrator, --config), the
    PATH of this shell (cron's own PATH rarely holds the agents), `tick
    --quiet`, and appends its log to orchestrator.log beside the config.
    --install edits your crontab: the line, marked with `# orchestrator-cron`
    and the config's path, is added once or replaced in place; --uninstall
    removes it. Other lines are never touched.
    """
    from orchestrator import scaffold
    from orchestrator.scaffold import cron_line

    if install and uninstall:
        raise click.UsageError("give --install or --uninstall, not both")

    settings = app.settings(require_config=True)
    try:
        # --db (or ORCHESTRATOR_DB_URL) goes into the line, resolved: cron has
        # neither this shell's environment nor its working folder.
        db_url = settings.database_url if app.db else None
        line = cron_line(settings, every, db_url, os.environ.get("PATH", "/usr/bin:/bin"))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--every") from None
    if not (install or uninstall):
        click.echo(line)
        click.echo("# install it: orchestrator cron --install", err=True)
        return
    assert settings.config_path is not None
    current = scaffold.read_crontab()
    text, change = scaffold.edit_crontab(
        current, line if install else None, settings.config_path, printed=line
    )
    if text != current:
        scaffold.write_crontab(text)
    click.echo(
        {
            "installed": "installed in your crontab:",
            "replaced": "replaced this project's line in your crontab:",
            "unchanged": "already in your crontab:",
            "removed": "removed this project's line from your crontab",
            "absent": "your crontab has no line for this project; nothing changed",
        }[change]
        + (f"\n{line}" if install else "")
    )


def _shown_path(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _shown_url(settings: Settings) -> str:
    from sqlalchemy.engine import make_url

    return make_url(settings.database_url).render_as_string(hide_password=True)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Console-script entry point."""
    try:
        cli.main(args=argv, prog_name="orchestrator")
    except KeyboardInterrupt:
        click.echo("Error: interrupted", err=True)
        sys.exit(130)
    sys.exit(0)


__all__ = ["cli", "main"]


from orchestrator.explain_cli import explain  # noqa: E402  (its own module; see there)

cli.add_command(explain)
