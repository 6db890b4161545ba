"""The live tail of a running attempt: server-sent events of the lines its
command prints (`<command>.live` in the attempt's state folder, read through
`safefs`, which opens no link and no special file a worker planted).

Bounded on every side: the backlog is the file's last `BACKLOG` bytes, a
line is cut at `MAX_LINE` characters, one stream sends at most `MAX_BYTES`
and lasts at most `MAX_SECONDS`; it ends (event `end`) when the attempt
does. Each line is one `data:` field of cleaned text (no CR, NUL or other
control characters), which the page's script sets as text, never markup.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool

from orchestrator import safefs
from orchestrator.domain.text import clean_text
from orchestrator.storage import repo
from orchestrator.storage.db import read_tx
from orchestrator.views.reports import attempt_dir

BACKLOG = 8 * 1024
MAX_LINE = 2000
MAX_BYTES = 1024 * 1024
MAX_SECONDS = 600.0
POLL_SECONDS = 0.1
COMMANDS = ("setup", "worker", "verifier")


def running_folder(engine: Engine, state_root: Path, slug: str) -> Path | None:
    """The state folder of `slug`'s open attempt, or None when none runs."""
    with read_tx(engine) as conn:
        task = repo.get_task(conn, slug)
        if task is None:
            return None
        running = [a for a in repo.attempts_of(conn, task.id) if a.finished_at is None]
    return None if not running else attempt_dir(state_root, slug, running[-1])


def _event(data: str, name: str | None = None) -> str:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {data}\n\n"


def _line(raw: bytes) -> str:
    text = clean_text(raw.decode("utf-8", "replace")).replace("\r", "")
    text = "".join(c if c.isprintable() or c == "\t" else "\ufffd" for c in text)
    return text[:MAX_LINE] + ("…" if len(text) > MAX_LINE else "")


async def tail_events(engine: Engine, state_root: Path, slug: str) -> AsyncIterator[str]:
    folder = await run_in_threadpool(running_folder, engine, state_root, slug)
    if folder is None:
        yield _event("no attempt is running", "end")
        return
    offsets: dict[str, int] = {}
    partial: dict[str, bytes] = {}
    sent = 0
    deadline = time.monotonic() + MAX_SECONDS
    checked = time.monotonic()
    yield _event(f"following {folder.name}", "start")
    while time.monotonic() < deadline and sent < MAX_BYTES:
        for name in COMMANDS:
            path = folder / f"{name}.live"
            try:
                if name not in offsets:
                    size = (await run_in_threadpool(path.stat)).st_size
                    offsets[name] = max(0, size - BACKLOG)
                    partial[name] = b"" if offsets[name] == 0 else b"\0skip"
                data = await run_in_threadpool(
                    safefs.read_from, path, offsets[name], MAX_BYTES - sent
                )
            except OSError:
                offsets.pop(name, None)  # not there yet (or refused): look again
                continue
            offsets[name] += len(data)
            lines = (partial[name] + data).split(b"\n")
            partial[name] = lines.pop()
            for raw in lines:
                if raw.startswith(b"\0skip"):
                    continue  # the cut first line of the backlog
                sent += len(raw) + 1
                yield _event(_line(raw))
        if time.monotonic() - checked >= 1.0:
            checked = time.monotonic()
            if await run_in_threadpool(running_folder, engine, state_root, slug) != folder:
                yield _event("the attempt ended", "end")
                return
        await asyncio.sleep(POLL_SECONDS)
    yield _event("the live tail stops here (its time or size bound); reload for more", "end")
