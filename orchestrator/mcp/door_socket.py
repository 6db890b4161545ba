"""The door (`mcp.door`) over a Unix socket the tick serves for one attempt.

Inside bubblewrap an agent's `orchestrator mcp` sees neither the config
nor the database, and must not: the database is every task's, and write
access to it is write access to every gate. So for a sandboxed attempt the
tick listens on `door.sock` in the attempt's state folder (bound into the
sandbox writable, and a path socket crosses network namespaces), names it
in `ORCHESTRATOR_DOOR`, and does the door's work itself with its own
database, for that one task: its own task and subtasks to read, subtasks
to add (on its pipeline, at no higher priority). The socket lives only
while the attempt's commands run; its file is 0600.

The wire is one JSON line each way, `{"tool": ..., "args": {...}}` then
`{"answer": ...}` or `{"error": "..."}`, one request a connection, bounded
in size and time; an unknown tool or argument is refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from orchestrator.api.adding import Added
from orchestrator.config import Settings
from orchestrator.errors import OrchestratorError, RefusedError
from orchestrator.mcp.door import MAX_ROWS, Door
from orchestrator.storage import repo
from orchestrator.storage.db import read_tx
from orchestrator.views import reports

DOOR_ENV = "ORCHESTRATOR_DOOR"
SOCKET_NAME = "door.sock"
MAX_REQUEST = 64 * 1024  # a subtask's body is text for an agent, not a payload
MAX_ANSWER = 4 * 1024 * 1024
IO_SECONDS = 10.0  # one request's whole exchange, either side
# Each tool and the arguments it takes; anything else is refused unread.
TOOLS: dict[str, frozenset[str]] = {
    "list_tasks": frozenset({"state"}),
    "show_task": frozenset({"slug"}),
    "task_history": frozenset({"slug", "limit"}),
    "explain": frozenset({"slug"}),
    "add_subtask": frozenset({"title", "slug", "body", "pipeline", "after", "priority"}),
}
_TYPES: dict[str, tuple[type, ...]] = {
    "state": (str, type(None)),
    "slug": (str, type(None)),
    "limit": (int,),
    "title": (str,),
    "body": (str,),
    "pipeline": (str, type(None)),
    "after": (list,),
    "priority": (int, type(None)),
}


class ViewSource:
    """What the door reads, through the read side: the tick may not import
    the library face (`api.project` runs ticks)."""

    def __init__(self, settings: Settings, engine: Engine, added: Added | None = None) -> None:
        self.settings = settings
        self.engine = engine
        self.added = added

    def tasks(self, state: str | None = None) -> list[dict[str, Any]]:
        stages = {s.name for p in self.settings.pipelines.values() for s in p.stages}
        return reports.list_tasks(self.engine, state, stages)

    def task(self, slug: str) -> dict[str, Any]:
        return reports.show_task(self.engine, slug, self.settings.state_root)

    def history(self, slug: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        return reports.history(self.engine, slug, limit)

    def explain(self, slug: str) -> dict[str, Any]:
        from orchestrator.views.explain import explain_task

        return explain_task(self.engine, self.settings, slug)


class TaskDoor:
    """The door for one task: reads of that task and its subtasks only,
    and the door's own checks on what it adds."""

    def __init__(self, source: ViewSource, slug: str) -> None:
        self.source = source
        self.slug = slug
        self.door = Door(source, {"ORCHESTRATOR_TASK": slug})

    def call(self, tool: object, args: object) -> Any:
        if not isinstance(tool, str) or tool not in TOOLS:
            raise RefusedError(f"no tool {str(tool)[:40]!r} at this door")
        if not isinstance(args, dict):
            raise RefusedError("args must be an object")
        for name, value in args.items():
            if name not in TOOLS[tool]:
                raise RefusedError(f"{tool} takes no argument {str(name)[:40]!r}")
            if isinstance(value, bool) or not isinstance(value, _TYPES[name]):
                raise RefusedError(f"{tool}: {name} has the wrong type")
        if "after" in args and not all(isinstance(a, str) for a in args["after"]):
            raise RefusedError("add_subtask: after must be a list of task slugs")
        if tool == "add_subtask":
            return self.door.add_subtask(**args)
        family = self._family()
        if tool == "list_tasks":
            rows = [r for r in self.source.tasks(args.get("state")) if r["slug"] in family]
            return {"tasks": rows[:MAX_ROWS], "more": max(0, len(rows) - MAX_ROWS)}
        slug = args.get("slug")
        if slug not in family:
            raise RefusedError(
                f"{str(slug)[:80]!r} is neither this attempt's task ({self.slug}) nor one of "
                "its subtasks; this door reads no other"
            )
        return getattr(self.door, tool)(**args)

    def _family(self) -> set[str]:
        with read_tx(self.source.engine) as conn:
            task = repo.get_task(conn, self.slug)
            if task is None:
                return set()
            _, children = repo.family(conn, task.id)
        return {self.slug, *children}


@contextlib.contextmanager
def _address(path: Path) -> Iterator[str]:
    """A socket's path fits in 108 bytes; a deep state folder's may not.
    Then the folder is reached through an open descriptor of it."""
    if len(os.fsencode(path)) < 100:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def _read_line(conn: socket.socket, limit: int, deadline: float) -> bytes:
    """One line of at most `limit` bytes, before `deadline` (monotonic)."""
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the door's exchange took too long")
        conn.settimeout(left)
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > limit:
            raise RefusedError(f"a message over {limit} bytes")
    return data.partition(b"\n")[0]


class DoorServer:
    """One attempt's socket and the thread that answers it, one request at a time."""

    def __init__(self, door: TaskDoor, path: Path) -> None:
        self.door = door
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        with _address(path) as address:
            # Not through the umask, which is the whole tick's: before the
            # chmod, the usual umask leaves others no write, and no connect.
            self.sock.bind(address)
        path.chmod(0o600)
        self.sock.listen(8)
        self.wake_r, self.wake_w = os.pipe()
        self.thread = threading.Thread(target=self._serve, name="door", daemon=True)

    def __enter__(self) -> DoorServer:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        os.write(self.wake_w, b"x")
        self.thread.join()
        for fd in (self.wake_r, self.wake_w):
            os.close(fd)
        self.sock.close()
        with contextlib.suppress(OSError):
            self.path.unlink()

    def _serve(self) -> None:
        while True:
            ready, _, _ = select.select([self.sock.fileno(), self.wake_r], [], [])
            if self.wake_r in ready:
                return
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        deadline = time.monotonic() + IO_SECONDS
        try:
            request = json.loads(_read_line(conn, MAX_REQUEST, deadline))
            if not isinstance(request, dict):
                raise RefusedError("a request is a JSON object")
            reply: dict[str, Any] = {
                "answer": self.door.call(request.get("tool"), request.get("args", {}))
            }
        except (OSError, TimeoutError):
            return  # the client went away or stalled: nothing to answer
        except ValueError:
            reply = {"error": "a request is one line of JSON"}
        except OrchestratorError as exc:
            reply = {"error": str(exc)}
        except Exception as exc:  # the attempt's door stays up whatever one request does
            reply = {"error": f"internal error: {type(exc).__name__}"}
        data = json.dumps(reply, ensure_ascii=False, default=str).encode() + b"\n"
        if len(data) > MAX_ANSWER:
            data = json.dumps({"error": "the answer is too large"}).encode() + b"\n"
        with contextlib.suppress(OSError):
            conn.settimeout(max(0.1, deadline - time.monotonic()))
            conn.sendall(data)


@contextlib.contextmanager
def serving(
    settings: Settings, engine: Engine, slug: str, folder: Path, added: Added | None = None
) -> Iterator[Path]:
    """The door for `slug`'s attempt at `folder/door.sock`, while the block
    runs; `added` tells the features of a subtask it adds."""
    with DoorServer(TaskDoor(ViewSource(settings, engine, added), slug), folder / SOCKET_NAME):
        yield folder / SOCKET_NAME


class DoorClient:
    """The door's tools, asked of the tick's socket (what `orchestrator mcp`
    uses when `ORCHESTRATOR_DOOR` names one): the same names as `Door`."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def _call(self, tool: str, **args: Any) -> Any:
        line = json.dumps({"tool": tool, "args": args}).encode() + b"\n"
        deadline = time.monotonic() + IO_SECONDS * 3  # the tick may be writing
        try:
            with (
                socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock,
                _address(self.path) as address,
            ):
                sock.settimeout(IO_SECONDS)
                sock.connect(address)
                sock.sendall(line)
                raw = _read_line(sock, MAX_ANSWER, deadline)
        except (OSError, TimeoutError) as exc:
            raise RefusedError(
                f"the orchestrator's door ({DOOR_ENV}) did not answer: {exc}; "
                "it is open only while the attempt runs"
            ) from exc
        try:
            reply = json.loads(raw)
        except ValueError as exc:
            raise RefusedError("the orchestrator's door answered garbage") from exc
        if not isinstance(reply, dict):
            raise RefusedError("the orchestrator's door answered garbage")
        if "error" in reply:
            raise RefusedError(str(reply["error"]))
        return reply.get("answer")

    def list_tasks(self, state: str | None = None) -> Any:
        return self._call("list_tasks", state=state)

    def show_task(self, slug: str) -> Any:
        return self._call("show_task", slug=slug)

    def task_history(self, slug: str, limit: int = 50) -> Any:
        return self._call("task_history", slug=slug, limit=limit)

    def explain(self, slug: str) -> Any:
        return self._call("explain", slug=slug)

    def add_subtask(
        self,
        title: str,
        slug: str | None = None,
        body: str = "",
        pipeline: str | None = None,
        after: Sequence[str] = (),
        priority: int | None = None,
    ) -> Any:
        return self._call(
            "add_subtask",
            title=title,
            slug=slug,
            body=body,
            pipeline=pipeline,
            after=list(after),
            priority=priority,
        )
