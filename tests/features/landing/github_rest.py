"""The REST half of the GitHub look-alike (`github_api.py` serves it): what
`gh api` asks of a pull request once it is open: the pull request itself,
its reviews, its inline review comments, its conversation's comments, the
check runs of its head, the issue (who closed it), and the replies the
orchestrator posts. A look-alike of GitHub's REST API, because GitHub
cannot be reached here; `gh` itself is the real one.

ETags as GitHub gives them: every GET answers a strong `ETag` over its
body, and a request whose `If-None-Match` names it is answered `304 Not
Modified` with no body. As on GitHub, a pull request's `updated_at` moves
when a review or a comment is added (so its ETag does), while a check run
finishing does not move it."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ISSUES = re.compile(r"^/repos/[^/]+/[^/]+/issues\?(?P<query>.*)$")
ROUTE = re.compile(
    r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/"
    r"(?P<kind>pulls|issues|commits)/(?P<ref>[^/]+)(?P<rest>/[^?]*)?(?:\?.*)?$"
)


@dataclass
class PullState:
    """What a pull request holds beyond its GraphQL face."""

    number: int
    head: str
    state: str = "open"
    merged: bool = False
    merge_commit_sha: str | None = None
    closed_by: str | None = None
    updated: int = 0
    reviews: list[dict[str, Any]] = field(default_factory=list)
    review_comments: list[dict[str, Any]] = field(default_factory=list)
    issue_comments: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Rest:
    """The pull requests' REST state, and the ids it hands out."""

    checks: Callable[[str], list[dict[str, str]]]
    pulls: dict[int, PullState] = field(default_factory=dict)
    next_id: int = 1000
    # Issues (numbered from 100, apart from the pull requests): number ->
    # {"title", "body", "labels", "state", "comments"}.
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)

    def issue(self, number: int, title: str, body: str, labels: tuple[str, ...]) -> None:
        self.issues[number] = {
            "title": title,
            "body": body,
            "labels": list(labels),
            "state": "open",
            "comments": [],
        }

    def pull(self, number: int, head: str) -> PullState:
        return self.pulls.setdefault(number, PullState(number, head))

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _user(self, login: str) -> dict[str, str]:
        return {"login": login, "type": "Bot" if login.endswith("[bot]") else "User"}

    def review(self, pull: PullState, login: str, state: str, body: str = "") -> int:
        found = self._id()
        pull.reviews.append(
            {
                "id": found,
                "user": self._user(login),
                "state": state,
                "body": body,
                "submitted_at": "2026-12-05T01:00:00Z",
                "html_url": f"https://github.localhost/pull/{pull.number}#review-{found}",
            }
        )
        pull.updated += 1
        return found

    def inline(
        self, pull: PullState, login: str, body: str, path: str, line: int, reply_to: int | None
    ) -> int:
        found = self._id()
        comment = {
            "id": found,
            "user": self._user(login),
            "body": body,
            "path": path,
            "line": line,
            "created_at": "2026-12-05T01:00:00Z",
            "html_url": f"https://github.localhost/pull/{pull.number}#discussion_r{found}",
        }
        if reply_to is not None:
            comment["in_reply_to_id"] = reply_to
        pull.review_comments.append(comment)
        pull.updated += 1
        return found

    def conversation(self, pull: PullState, login: str, body: str) -> int:
        found = self._id()
        pull.issue_comments.append(
            {
                "id": found,
                "user": self._user(login),
                "body": body,
                "created_at": "2026-12-05T01:00:00Z",
                "html_url": f"https://github.localhost/pull/{pull.number}#issuecomment-{found}",
            }
        )
        pull.updated += 1
        return found

    def get(self, path: str) -> tuple[int, Any]:
        listed = ISSUES.match(path)
        if listed is not None:
            query = dict(part.partition("=")[::2] for part in listed["query"].split("&"))
            label, state = query.get("labels"), query.get("state", "open")
            return 200, [
                {
                    "number": number,
                    "title": issue["title"],
                    "body": issue["body"],
                    "labels": [{"name": name} for name in issue["labels"]],
                    "state": issue["state"],
                    "html_url": f"https://github.localhost/issues/{number}",
                }
                for number, issue in sorted(self.issues.items())
                if issue["state"] == state and (not label or label in issue["labels"])
            ]
        match = ROUTE.match(path)
        if match is None:
            return 404, {"message": "Not Found"}
        kind, ref, rest = match["kind"], match["ref"], match["rest"] or ""
        if kind == "commits" and rest == "/check-runs":
            head = next((p.head for p in self.pulls.values() if ref in (p.head, _sha(p))), ref)
            runs = [_run(i, check) for i, check in enumerate(self.checks(head), start=1)]
            return 200, {"total_count": len(runs), "check_runs": runs}
        pull = self.pulls.get(int(ref)) if ref.isdigit() else None
        if pull is None:
            return 404, {"message": "Not Found"}
        if kind == "pulls" and rest == "":
            return 200, _pull_json(pull, match["owner"], match["repo"])
        if kind == "pulls" and rest == "/reviews":
            return 200, pull.reviews
        if kind == "pulls" and rest == "/comments":
            return 200, pull.review_comments
        if kind == "issues" and rest == "/comments":
            return 200, pull.issue_comments
        if kind == "issues" and rest == "":
            closer = None if pull.closed_by is None else self._user(pull.closed_by)
            return 200, {"number": pull.number, "state": pull.state, "closed_by": closer}
        return 404, {"message": "Not Found"}

    def post(self, path: str, body: dict[str, Any], login: str) -> tuple[int, Any]:
        match = ROUTE.match(path)
        if match is None or not match["ref"].isdigit():
            return 404, {"message": "Not Found"}
        issue = self.issues.get(int(match["ref"]))
        if issue is not None and match["kind"] == "issues" and match["rest"] == "/comments":
            issue["comments"].append({"user": login, "body": body.get("body")})
            return 201, {"id": self._id()}
        pull = self.pulls.get(int(match["ref"]))
        rest = match["rest"] or ""
        text = body.get("body")
        if pull is None or not isinstance(text, str):
            return 422, {"message": "Validation Failed"}
        replied = re.fullmatch(r"/comments/(\d+)/replies", rest)
        if match["kind"] == "pulls" and replied:
            parent = next((c for c in pull.review_comments if c["id"] == int(replied[1])), None)
            if parent is None:
                return 404, {"message": "Not Found"}
            found = self.inline(pull, login, text, parent["path"], parent["line"], parent["id"])
            return 201, {"id": found}
        if match["kind"] == "issues" and rest == "/comments":
            return 201, {"id": self.conversation(pull, login, text)}
        return 404, {"message": "Not Found"}


def etag(body: Any) -> str:
    return '"' + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32] + '"'


def _sha(pull: PullState) -> str:
    return hashlib.sha1(pull.head.encode()).hexdigest()


def _pull_json(pull: PullState, owner: str, repo: str) -> dict[str, Any]:
    return {
        "number": pull.number,
        "state": pull.state,
        "merged": pull.merged,
        "merge_commit_sha": pull.merge_commit_sha,
        "html_url": f"http://github.localhost/{owner}/{repo}/pull/{pull.number}",
        "head": {"ref": pull.head, "sha": _sha(pull)},
        "updated_at": f"2026-12-05T01:{pull.updated // 60:02d}:{pull.updated % 60:02d}Z",
    }


def _run(index: int, check: dict[str, str]) -> dict[str, Any]:
    state = check.get("state", "pending")
    done = state in ("success", "failure")
    return {
        "id": index,
        "name": check.get("name", "?"),
        "status": "completed" if done else "in_progress",
        "conclusion": state if done else None,
        "html_url": f"https://github.localhost/checks/{index}",
    }
