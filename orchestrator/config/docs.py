"""The key tables of `docs/reference/configuration.md`, made from the Sections.

The page's prose is written by hand; each key table sits between
`<!-- generated: NAME -->` and `<!-- end -->` and is rendered here, so a
key's line in the reference is the `doc` it was declared with. A test
fails when the page differs from what this renders;
`python -m orchestrator.config.docs --write` brings the page up to date.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestrator.config.core import ENGINE_TABLES, schema
from orchestrator.config.orchestrator_table import ORCHESTRATOR_SECTION
from orchestrator.config.schema import DEFAULTS, PIPELINE, STAGE, Key, Nested, Schema, Section
from orchestrator.config.sections import FEATURE_SECTIONS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "configuration.md"
_BLOCK = re.compile(r"(<!-- generated: (?P<name>[^>]+?) -->\n)(?P<body>.*?)(<!-- end -->)", re.S)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _key_table(keys: Sequence[Key[Any]]) -> str:
    return _table(
        ("key", "default", "meaning"), [(f"`{k.name}`", k.default_text(), k.doc) for k in keys]
    )


def _nested(keys: Sequence[Key[Any]]) -> list[Section[Any]]:
    """The inline tables among `keys` (`plateau`, `backoff`), each once."""
    found: list[Section[Any]] = []
    for item in keys:
        if isinstance(item.kind, Nested) and item.kind.section not in found:
            found.append(item.kind.section)
    return found


def tables(the_schema: Schema) -> dict[str, str]:
    """Each generated table by its marker's name."""
    stage_keys = the_schema.keys(STAGE)
    top = [*ENGINE_TABLES, *((s.table or "", s.table_doc) for s in the_schema.tables())]
    found = {
        "top tables": _table(("key", "meaning"), [(f"`{name}`", doc) for name, doc in top]),
        "orchestrator keys": _key_table(ORCHESTRATOR_SECTION.keys),
        "pipeline keys": _table(
            ("key", "meaning"),
            [(f"`{k.name}`", k.pipeline_doc or k.doc) for k in the_schema.keys(PIPELINE)],
        ),
        "stage keys": _table(
            ("key", "`[defaults]`", "default", "meaning"),
            [
                (f"`{k.name}`", "yes" if DEFAULTS in k.scope else "no", k.default_text(), k.doc)
                for k in stage_keys
            ],
        ),
    }
    for section in _nested(stage_keys):
        found[f"{section.table} keys"] = _key_table(section.keys)
    for section in the_schema.tables():
        table = section.table or ""
        found[f"{table} keys"] = _key_table([k for k in section.keys if table in k.scope])
    return found


def render(page: str, the_schema: Schema) -> str:
    """`page` with each generated table made anew; a marker naming no
    table, or a table with no marker, is an error (the page would lie)."""
    made = tables(the_schema)
    seen: set[str] = set()

    def fill(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in made:
            raise ValueError(f"configuration.md: no generated table is called {name!r}")
        seen.add(name)
        return match.group(1) + made[name] + match.group(4)

    result = _BLOCK.sub(fill, page)
    missing = sorted(set(made) - seen)
    if missing:
        raise ValueError(f"configuration.md has no place for: {', '.join(missing)}")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m orchestrator.config.docs",
        description="Check (or, with --write, regenerate) the key tables of configuration.md.",
    )
    parser.add_argument("--write", action="store_true", help="rewrite the page in place")
    parser.add_argument("--page", type=Path, default=PAGE, help="the page (default: the repo's)")
    args = parser.parse_args(argv)
    page = args.page.read_text(encoding="utf-8")
    wanted = render(page, schema(FEATURE_SECTIONS))
    if wanted == page:
        return 0
    if args.write:
        args.page.write_text(wanted, encoding="utf-8")
        return 0
    print(f"{args.page}: the key tables are out of date; run with --write", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
