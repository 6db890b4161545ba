"""How the commands print: tables, JSON, CSV, times and paths, in one place.

Every command renders through here so that a table on a terminal, a CSV for a
spreadsheet and JSON for a script agree on their columns, and so that text
from agents (titles, notes, reasons) can never drive the terminal.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

MIN_COLUMN = 8
KEEP_WHOLE = 32  # a column this narrow is a time, a state or a slug: cut last


def now() -> str:
    """The locale-independent time a log line starts with: ISO 8601, UTC, seconds."""
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="seconds")


def short_time(value: str | None) -> str:
    """One time format for tables (`show`, `history`): UTC to the second, as
    `YYYY-MM-DD HH:MM:SS`; JSON and CSV keep the stored precision."""
    if not value:
        return ""
    return value.replace("T", " ")[:19]


def emit_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str) -> None:
    """Print `rows` as `fmt`: "json" (a list of objects), "csv" or "table"."""
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
        click.echo(table(columns, rows))


def emit_json(value: Any) -> None:
    """A JSON document for scripts, non-ASCII text kept readable."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def format_options(csv_ok: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--json` (and `--csv`) as one `fmt` parameter, the same on every command."""

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


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], width: int | None = None) -> str:
    """Aligned columns. Piped or redirected (`width` None off a terminal),
    nothing is cut: a plateau reason that loses its numbers is worse than a
    long line. On a terminal the long text columns shrink first, so times,
    states and slugs stay whole, and a cut cell ends with `…`. Widths are
    what a terminal shows (a CJK character takes two columns)."""

    def cell(value: Any, column: str) -> str:
        if value is None:
            return ""
        if isinstance(value, float | int) and column.endswith("_usd"):
            from orchestrator.domain.money import money

            return money(float(value))
        if isinstance(value, float):
            return f"{value:.2f}"
        return printable(str(value))

    if width is None and sys.stdout.isatty():
        import shutil

        width = shutil.get_terminal_size().columns
    cells = [[cell(v, c) for v, c in zip(row, columns, strict=True)] for row in rows]
    widths = [
        max([text_width(c)] + [text_width(r[i]) for r in cells]) for i, c in enumerate(columns)
    ]
    if width is not None:
        widths = _fit(widths, width - 2 * (len(columns) - 1))

    def line(values: Sequence[str]) -> str:
        return "  ".join(_pad(v, w) for v, w in zip(values, widths, strict=True)).rstrip()

    return "\n".join([line(columns)] + [line(r) for r in cells])


def printable(text: str) -> str:
    """Text as a terminal should show it: what an agent or a title carries
    (escape sequences, bidi overrides, tabs, newlines) never drives the
    terminal; each such character becomes a space or `?`."""
    import unicodedata  # not on the busy-lock path, which prints no table

    out = []
    for char in text:
        if char in "\t\r\n":
            out.append(" ")
        elif unicodedata.category(char) in ("Cc", "Cf", "Cs"):
            out.append("?")
        else:
            out.append(char)
    return "".join(out)


def text_width(text: str) -> int:
    """Columns a terminal gives `text`: wide East Asian characters take two."""
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
    if text_width(text) > width:
        kept, used = [], 0
        for char in text:
            size = text_width(char)
            if used + size > max(0, width - 1):
                break
            kept.append(char)
            used += size
        text = "".join(kept) + "…"
    return text + " " * max(0, width - text_width(text))


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


def shown_path(path: Path) -> str:
    """`path` relative to the working folder when it is under it: shorter to read."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def shown_url(database_url: str) -> str:
    """A database URL fit to print: its password hidden."""
    from sqlalchemy.engine import make_url

    return make_url(database_url).render_as_string(hide_password=True)
