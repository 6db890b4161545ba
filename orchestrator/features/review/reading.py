"""What GitHub's answers mean for a held task, without I/O: which reviews,
comments and check runs are feedback (a person's, not the orchestrator's
own account's, not a bot's unless asked), and the hint they become."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from orchestrator.domain.text import clean_text, one_line
from orchestrator.features.review.store import Feedback

# A comment's body as the hint carries it (a 1 MB comment is cut, not lost:
# its row keeps BODY_KEPT of it, its URL the rest).
BODY_IN_HINT = 4000
BODY_KEPT = 65536
HINT_LIMIT = 20000
FAILED = frozenset({"failure", "timed_out", "cancelled", "action_required", "startup_failure"})
_PULL_URL = re.compile(r"^https?://[^/]+/(?P<repo>[^/]+/[^/]+)/pull/(?P<number>\d+)/?$")
# A terminal escape (CSI, OSC, a lone ESC): stored and shown without it.
_ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|.)?")


def pull_of_url(url: str) -> tuple[str, int] | None:
    """(`OWNER/NAME`, number) of a pull request's URL."""
    match = _PULL_URL.match(url.strip())
    return None if match is None else (match["repo"], int(match["number"]))


def _text(value: object) -> str:
    raw = value if isinstance(value, str) else ""
    return clean_text(_ESCAPES.sub("", raw), BODY_KEPT)


def _when(value: object) -> datetime:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return datetime.now(UTC)


def _author(item: Mapping[str, Any]) -> tuple[str, bool]:
    user = item.get("user")
    if not isinstance(user, dict):
        return "?", False
    login = str(user.get("login") or "?")
    return login, user.get("type") == "Bot" or login.endswith("[bot]")


def feedback(
    reviews: Iterable[Any],
    inline: Iterable[Any],
    conversation: Iterable[Any],
    own: str | None,
    from_bots: bool,
) -> list[Feedback]:
    """Every review and comment of a person (or a bot, with `from_bots`);
    the orchestrator's own (`own`, its replies) are never feedback."""
    found: list[Feedback] = []
    for kind, items in (("review", reviews), ("inline", inline), ("conversation", conversation)):
        for item in items:
            if not isinstance(item, dict) or "id" not in item:
                continue
            login, bot = _author(item)
            if login == own or (bot and not from_bots):
                continue
            line = item.get("line") if isinstance(item.get("line"), int) else None
            found.append(
                Feedback(
                    key=f"{kind}:{item['id']}",
                    kind=kind,
                    author=login,
                    body=_text(item.get("body")),
                    at=_when(item.get("submitted_at") or item.get("created_at")),
                    state=str(item["state"]) if kind == "review" and item.get("state") else None,
                    path=str(item["path"]) if item.get("path") else None,
                    line=line,
                    url=str(item["html_url"]) if item.get("html_url") else None,
                )
            )
    return found


def sends_back(item: Feedback) -> bool:
    """Changes requested, a comment, a failing check; an approval or an
    empty "commented" review is recorded only."""
    if item.kind == "review":
        return item.state == "CHANGES_REQUESTED" or (
            item.state == "COMMENTED" and bool(item.body.strip())
        )
    return True


def check_runs(answer: Any, sha: str) -> tuple[list[Feedback], bool]:
    """The failing check runs of `sha` (one row per check and commit), and
    whether any is still running."""
    runs = answer.get("check_runs", []) if isinstance(answer, dict) else []
    failed: list[Feedback] = []
    pending = False
    for run in runs if isinstance(runs, list) else []:
        if not isinstance(run, dict):
            continue
        name = one_line(str(run.get("name") or "?"), 200)
        if run.get("status") != "completed":
            pending = True
        elif run.get("conclusion") in FAILED:
            failed.append(
                Feedback(
                    key=f"check:{sha}:{name}",
                    kind="check",
                    author="checks",
                    body=f"check {name} {run.get('conclusion')}",
                    at=datetime.now(UTC),
                    url=str(run["html_url"]) if run.get("html_url") else None,
                )
            )
    return failed, pending


def hint(url: str, items: Sequence[Feedback]) -> str:
    """The next attempt's hint: where each came from, and its words."""
    lines = [f"Review feedback on {url}; address each point:"]
    for item in items:
        where = f" on {item.path}:{item.line}" if item.path else ""
        what = item.state.lower().replace("_", " ") + ": " if item.state else ""
        body = item.body if len(item.body) <= BODY_IN_HINT else item.body[:BODY_IN_HINT] + " …"
        link = f" ({item.url})" if item.url else ""
        lines.append(f"- {item.author}{where}{link}: {what}{body}")
    return clean_text("\n".join(lines), HINT_LIMIT)
