"""A local look-alike of GitHub's API (GraphQL and REST), for the tests of
pull requests.

GitHub cannot run here (no network but the package registries), so this is
the one look-alike the tests use: everything else (git, the bare `origin`,
the `gh` CLI itself, Debian's 2.23) is real. It speaks only the GraphQL
operations that `gh` 2.23 sends for `gh pr create --head`, `gh pr list
--head`, `gh pr view BRANCH` and `gh pr checks BRANCH`, answering each with
one superset of the fields those commands read (gh ignores the rest).

How `gh` reaches it without TLS: gh 2.23 talks plain `http` to exactly one
host, `github.localhost` (its local-development host: REST at
`http://api.github.localhost/`, GraphQL at `.../graphql`), and its HTTP
client honours `HTTP_PROXY`. So `GH_HOST=github.localhost`,
`HTTP_PROXY=http://127.0.0.1:PORT` and `GH_TOKEN` send every request here
as a proxy request (`POST http://api.github.localhost/graphql`), and no
name has to resolve. See the decision record "gh against a local API".

The REST half (`github_rest.py`) serves what `gh api` asks of an open pull
request (reviews, review comments, issue comments, check runs, merge
state), with ETags answered 304 as GitHub answers them.

Every request is logged (`requests`, and one JSON line each in `log_file`)
so a test counts pull-request creations across processes. The checks of a
branch are read from `checks_file` at each request, so a test (or another
process) flips them by rewriting that file.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from features.landing.github_rest import PullState, Rest, etag

HOST = "github.localhost"
_OPERATION = re.compile(r"\b(query|mutation)\s+(\w+)")


@dataclass
class PullRequest:
    number: int
    head: str
    base: str
    title: str
    body: str
    draft: bool
    owner: str
    repo: str

    @property
    def url(self) -> str:
        return f"http://{HOST}/{self.owner}/{self.repo}/pull/{self.number}"

    @property
    def node_id(self) -> str:
        return f"PR_{self.number}"


@dataclass
class FakeGitHub:
    """The server's state: the pull requests, the token it accepts, its log."""

    folder: Path
    token: str = "test-token"
    pulls: list[PullRequest] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0
    rest: Rest = field(init=False)

    def __post_init__(self) -> None:
        self.rest = Rest(checks=lambda branch: self._read_checks().get(branch, []))

    def pull_state(self, number: int = 1) -> PullState:
        return self.rest.pulls[number]

    def rest_calls(self) -> list[dict[str, Any]]:
        """Every REST request (`gh api`), with the status it was answered."""
        return [r for r in self.logged() if str(r.get("path", "")).startswith("/repos/")]

    @property
    def log_file(self) -> Path:
        return self.folder / "requests.jsonl"

    @property
    def checks_file(self) -> Path:
        """{"branch": [{"name": ..., "state": "pending|success|failure"}]}"""
        return self.folder / "checks.json"

    def env(self, token: str | None = None, repo: str = "octo/widget") -> dict[str, str]:
        """What a process needs to reach this server as `gh` reaches GitHub."""
        return {
            "GH_HOST": HOST,
            "GH_TOKEN": self.token if token is None else token,
            "GH_REPO": f"{HOST}/{repo}",
            "HTTP_PROXY": f"http://127.0.0.1:{self.port}",
            "http_proxy": f"http://127.0.0.1:{self.port}",
            "NO_PROXY": "",
            "no_proxy": "",
            "GH_CONFIG_DIR": str(self.folder / "gh-config"),
        }

    def set_checks(self, branch: str, checks: Mapping[str, str]) -> None:
        """Replace a branch's checks ({name: pending|success|failure}), atomically."""
        data = self._read_checks()
        data[branch] = [{"name": name, "state": state} for name, state in checks.items()]
        temporary = self.checks_file.with_suffix(".tmp")
        temporary.write_text(json.dumps(data))
        temporary.replace(self.checks_file)

    def created(self) -> list[dict[str, Any]]:
        """Every `createPullRequest` this server received (from any process)."""
        return [r for r in self.logged() if r.get("operation") == "PullRequestCreate"]

    def logged(self) -> list[dict[str, Any]]:
        if not self.log_file.exists():
            return []
        return [json.loads(line) for line in self.log_file.read_text().splitlines() if line]

    def _read_checks(self) -> dict[str, list[dict[str, str]]]:
        try:
            data = json.loads(self.checks_file.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    # --- the GraphQL operations gh 2.23 sends ---------------------------------

    def answer(self, operation: str, variables: dict[str, Any]) -> dict[str, Any]:
        owner = variables.get("owner", "octo")
        name = variables.get("repo") or variables.get("name") or "widget"
        if operation == "RepositoryInfo":
            return {"data": {"repository": _repository(owner, name)}}
        if operation in ("PullRequestForBranch", "PullRequestList"):
            head = variables.get("headRefName") or variables.get("headBranch")
            states = variables.get("states") or variables.get("state")
            found = [p for p in self.pulls if p.head == head]
            if states:
                found = [p for p in found if "OPEN" in states]
            nodes = [self._node(p) for p in reversed(found)]
            pulls = {
                "totalCount": len(nodes),
                "nodes": nodes,
                "pageInfo": {"hasNextPage": False, "endCursor": None},
            }
            return {
                "data": {
                    "repository": {
                        "pullRequests": pulls,
                        "defaultBranchRef": {"name": "main"},
                    }
                }
            }
        if operation == "PullRequestCreate":
            data = variables["input"]
            with self.lock:
                if any(p.head == data["headRefName"] for p in self.pulls):
                    return _error(f"A pull request already exists for {data['headRefName']}.")
                pull = PullRequest(
                    number=len(self.pulls) + 1,
                    head=data["headRefName"],
                    base=data["baseRefName"],
                    title=data["title"],
                    body=data["body"],
                    draft=bool(data.get("draft")),
                    owner="octo",
                    repo="widget",
                )
                self.pulls.append(pull)
                self.rest.pull(pull.number, pull.head)
            return {"data": {"createPullRequest": {"pullRequest": self._node(pull)}}}
        if operation in ("PullRequestStatusChecks", "PullRequestByNumber"):
            wanted = variables.get("id") or f"PR_{variables.get('pr_number')}"
            pull = next((p for p in self.pulls if p.node_id == wanted), None)
            if pull is None:
                return _error("Could not resolve to a node")
            if operation == "PullRequestByNumber":
                return {"data": {"repository": {"pullRequest": self._node(pull)}}}
            return {"data": {"node": self._node(pull)}}
        return _error(f"the look-alike does not speak {operation}")

    def _node(self, pull: PullRequest) -> dict[str, Any]:
        contexts = [_context(check) for check in self._read_checks().get(pull.head, [])]
        rollup = {
            "nodes": [
                {
                    "commit": {
                        "oid": "0" * 40,
                        "statusCheckRollup": {
                            "contexts": {
                                "nodes": contexts,
                                "pageInfo": {"hasNextPage": False, "endCursor": ""},
                            }
                        },
                    }
                }
            ]
        }
        return {
            "id": pull.node_id,
            "number": pull.number,
            "url": pull.url,
            "title": pull.title,
            "body": pull.body,
            "state": "OPEN",
            "isDraft": pull.draft,
            "headRefName": pull.head,
            "baseRefName": pull.base,
            "isCrossRepository": False,
            "headRepositoryOwner": {"id": "U_1", "login": pull.owner, "name": pull.owner},
            "headRepository": {"id": "R_1", "name": pull.repo},
            "author": {"login": pull.owner},
            "statusCheckRollup": rollup,
        }


def _repository(owner: str, name: str) -> dict[str, Any]:
    info = {
        "id": "R_1",
        "name": name,
        "owner": {"login": owner},
        "hasIssuesEnabled": True,
        "description": "",
        "hasWikiEnabled": False,
        "viewerPermission": "WRITE",
        "defaultBranchRef": {"name": "main"},
    }
    return {
        **info,
        "parent": None,
        "mergeCommitAllowed": True,
        "rebaseMergeAllowed": True,
        "squashMergeAllowed": True,
    }


def _context(check: Mapping[str, str]) -> dict[str, Any]:
    state = check.get("state", "pending")
    done = state in ("success", "failure")
    return {
        "__typename": "CheckRun",
        "name": check.get("name", "?"),
        "status": "COMPLETED" if done else "IN_PROGRESS",
        "conclusion": state.upper() if done else "",
        "startedAt": "2026-12-01T10:00:00Z",
        "completedAt": "2026-12-01T10:01:00Z" if done else "0001-01-01T00:00:00Z",
        "detailsUrl": f"http://{HOST}/checks/{check.get('name', '')}",
        "isRequired": True,
    }


def _error(message: str) -> dict[str, Any]:
    return {"data": None, "errors": [{"type": "UNPROCESSABLE", "message": message}]}


def _handler(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass  # the JSON log is the record

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            path = re.sub(r"^https?://[^/]+", "", self.path)
            entry: dict[str, Any] = {"method": self.command, "path": path}
            try:
                payload = json.loads(raw) if raw else {}
            except ValueError:
                payload = {}
            query = payload.get("query", "") if isinstance(payload, dict) else ""
            match = _OPERATION.search(query)
            entry["operation"] = match.group(2) if match else None
            entry["variables"] = payload.get("variables") if isinstance(payload, dict) else None
            authorized = self.headers.get("Authorization") == f"token {fake.token}"
            entry["authorized"] = authorized
            entry["if_none_match"] = self.headers.get("If-None-Match")
            if authorized and path.startswith("/repos/"):
                with fake.lock:
                    self._rest(fake, entry, payload)
                return
            with fake.lock:
                fake.requests.append(entry)
                with fake.log_file.open("a") as log:
                    log.write(json.dumps(entry) + "\n")
            if not authorized:
                self._send(401, {"message": "Bad credentials"})
            elif path == "/graphql" and match:
                self._send(200, fake.answer(match.group(2), entry["variables"] or {}))
            elif path.rstrip("/") in ("", "/user"):
                self._send(200, {"login": "octo"}, {"X-Oauth-Scopes": "repo, read:org"})
            else:
                self._send(404, {"message": "Not Found"})

        def _rest(self, fake: FakeGitHub, entry: dict[str, Any], payload: Any) -> None:
            """A REST call, answered and logged (with its status) under the lock."""
            path = entry["path"]
            if self.command == "GET":
                status, body = fake.rest.get(path)
                tag = etag(body)
                if status == 200 and entry["if_none_match"] == tag:
                    status = 304
            else:
                data = payload if isinstance(payload, dict) else {}
                status, body = fake.rest.post(path, data, "octo")
                tag = etag(body)
            entry["status"] = status
            fake.requests.append(entry)
            with fake.log_file.open("a") as log:
                log.write(json.dumps(entry) + "\n")
            if status == 304:
                self.send_response(304)
                self.send_header("ETag", tag)
                self.end_headers()
                return
            self._send(status, body, {"ETag": tag})

        def _send(
            self, status: int, body: object, headers: Mapping[str, str] | None = None
        ) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[FakeGitHub]:
    """The look-alike on a loopback port while the block runs (its log and
    checks files in `folder`)."""
    folder.mkdir(parents=True, exist_ok=True)
    fake = FakeGitHub(folder=folder)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    fake.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def github(tmp_path: Path) -> Iterator[FakeGitHub]:
    """The look-alike, serving for the test's duration."""
    with serve(tmp_path / "github") as fake:
        yield fake
