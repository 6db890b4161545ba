"""Run the orchestrator CLI and write how many SQL statements it executed.

`python stmt_counter.py OUT ARGS...` counts what the crash sweep's own
counter counts (orchestrator/testing.py): `after_cursor_execute` events on
every engine, and the `Prepared` statements, which run on the driver cursor
and report themselves through `testing.statement_executed`. It writes the
count and the statements to OUT when the process exits, and the commits
(`ORCHESTRATOR_TEST_LOSE_COMMIT` counts those).
"""

from __future__ import annotations

import atexit
import json
import sys
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

STATEMENTS: list[str] = []
COMMITS: list[int] = []  # how many statements had run at each commit


@event.listens_for(Engine, "after_cursor_execute")
def _count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
    STATEMENTS.append(" ".join(statement.split())[:120])


@event.listens_for(Engine, "commit")
def _commit(_conn: Any) -> None:
    COMMITS.append(len(STATEMENTS))


def _prepared(sql: str = "", _driver: Any = None) -> None:
    STATEMENTS.append(" ".join(sql.split())[:120])


def _write() -> None:
    Path(OUT).write_text(
        json.dumps({"count": len(STATEMENTS), "statements": STATEMENTS, "commits": COMMITS})
    )


if __name__ == "__main__":
    OUT = sys.argv[1]
    atexit.register(_write)
    from orchestrator import testing

    testing.statement_executed = _prepared
    from orchestrator.cli import main

    main(sys.argv[2:])
