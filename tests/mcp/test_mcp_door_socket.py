"""The tick's door socket (`mcp.door_socket`) on its wire: a real socket
over a real database, asked what an agent in a sandbox could ask, right
and wrong. What reaches it through `orchestrator mcp` in bubblewrap is in
test_mcp_sandbox."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from support import Project

from orchestrator.api.project import Project as Library
from orchestrator.errors import RefusedError
from orchestrator.mcp.door_socket import MAX_REQUEST, DoorClient, serving


@pytest.fixture
def backend() -> str:
    return "sqlite"


def ask(path: Path, raw: bytes) -> dict[str, object]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(path))
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return dict(json.loads(answer))


def test_the_door_answers_its_task_and_refuses_the_rest(project: Project, tmp_path: Path) -> None:
    assert project.run("add", "mine", "--title", "Mine").returncode == 0
    assert project.run("add", "theirs", "--title", "Theirs").returncode == 0
    # Deeper than a socket's 108-byte path: reached through the folder's descriptor.
    folder = tmp_path / ("d" * 60) / ("e" * 60)
    folder.mkdir(parents=True)
    library = Library.open(project.config, db=project.db_url)
    try:
        with serving(library.settings, library.engine, "mine", folder) as path:
            assert path.stat().st_mode & 0o777 == 0o600
            door = DoorClient(str(path))
            assert door.show_task("mine")["slug"] == "mine"
            assert [t["slug"] for t in door.list_tasks()["tasks"]] == ["mine"]
            with pytest.raises(RefusedError, match="nor one of its subtasks"):
                door.show_task("theirs")
            with pytest.raises(RefusedError, match="not running an attempt"):
                door.add_subtask("x")
            short = tmp_path / "s.sock"
            short.symlink_to(path)  # the raw wire, at a path short enough to connect
            refusals = {
                b'{"tool": "approve", "args": {"slug": "theirs"}}\n': "no tool 'approve'",
                b'{"tool": "show_task", "args": {"slug": "mine", "x": 1}}\n': "no argument 'x'",
                b'{"tool": "show_task", "args": {"slug": 7}}\n': "wrong type",
                b'{"tool": "add_subtask", "args": {"title": "t", "after": [1]}}\n': "list of task",
                b"not json\n": "one line of JSON",
                b"[]\n": "a JSON object",
                b'{"tool": "list_tasks", "args": {"state": "' + b"x" * MAX_REQUEST + b'"}}\n': (
                    f"over {MAX_REQUEST} bytes"
                ),
            }
            for raw, why in refusals.items():
                reply = ask(short, raw)
                assert why in str(reply.get("error")), (raw[:60], reply)
            assert ask(short, b'{"tool": "show_task", "args": {"slug": "mine"}}\n')["answer"]
        assert not path.exists()  # gone with the attempt
        with pytest.raises(RefusedError, match="did not answer"):
            door.show_task("mine")
    finally:
        library.close()
