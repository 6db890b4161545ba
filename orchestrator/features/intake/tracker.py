"""The one small interface a tracker answers, and GitHub's answer to it
through `gh api` (conditional: an unchanged list costs a 304). Another
tracker (GitLab, Jira) is one more class with these two methods."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from orchestrator.domain.text import one_line


@dataclass(frozen=True)
class Issue:
    number: int
    title: str
    body: str
    url: str


@dataclass(frozen=True)
class Unchanged:
    """Nothing changed since the list `etag` named."""


@dataclass(frozen=True)
class Fault:
    """The tracker could not answer: the host's, never a task's."""

    reason: str


class Tracker(Protocol):
    def open_issues(
        self, label: str, etag: str | None
    ) -> tuple[list[Issue], str | None] | Unchanged | Fault: ...

    def comment(self, number: int, body: str) -> Fault | None: ...


class GitHubTracker:
    """GitHub's issues through the real `gh` (its login or `GH_TOKEN`,
    `GH_HOST`), in an empty folder of its own."""

    def __init__(self, repo: str, env: Mapping[str, str], timeout: float = 60.0) -> None:
        self.repo = repo
        base = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
        self.env = {
            **base,
            "GH_PROMPT_DISABLED": "1",
            "GH_NO_UPDATE_NOTIFIER": "1",
            "NO_COLOR": "1",
            **env,
        }
        self.timeout = timeout

    def open_issues(
        self, label: str, etag: str | None
    ) -> tuple[list[Issue], str | None] | Unchanged | Fault:
        headers = ["-H", f"If-None-Match: {etag}"] if etag else []
        path = f"repos/{self.repo}/issues?state=open&per_page=100&labels={label}"
        got = self._api("-i", *headers, path)
        if isinstance(got, Fault):
            return got
        status, tag, body = got
        if status == 304:
            return Unchanged()
        if status != 200 or not isinstance(body, list):
            return Fault(f"GitHub answered {status} for the issues of {self.repo}")
        issues = [
            Issue(
                int(item["number"]),
                str(item.get("title") or ""),
                str(item.get("body") or ""),
                str(item.get("html_url") or ""),
            )
            for item in body
            if isinstance(item, dict)
            and isinstance(item.get("number"), int)
            and "pull_request" not in item
        ]
        return issues, tag

    def comment(self, number: int, body: str) -> Fault | None:
        got = self._api(
            "-i",
            "--method",
            "POST",
            "-f",
            f"body={body}",
            f"repos/{self.repo}/issues/{number}/comments",
        )
        if isinstance(got, Fault):
            return got
        return None if got[0] == 201 else Fault(f"GitHub answered {got[0]} to a comment")

    def _api(self, *args: str) -> tuple[int, str | None, object] | Fault:
        program = shutil.which("gh", path=self.env.get("PATH"))
        if program is None:
            return Fault("gh is not installed (intake from GitHub needs the GitHub CLI)")
        with tempfile.TemporaryDirectory(prefix="orchestrator-gh-") as folder:
            env = {**self.env, "GIT_CEILING_DIRECTORIES": str(Path(folder).parent)}
            try:
                done = subprocess.run(  # noqa: PLW1510 - the status line is read below
                    [program, "api", *args],
                    cwd=folder,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=self.timeout,
                    start_new_session=True,
                )
            except subprocess.TimeoutExpired:
                return Fault(f"gh api timed out after {self.timeout:g}s")
            except OSError as exc:
                return Fault(f"gh could not start: {exc.strerror}")
        head, _, body = done.stdout.replace("\r\n", "\n").partition("\n\n")
        lines = head.splitlines()
        if not lines or not lines[0].startswith("HTTP/"):
            return Fault(f"gh api failed: {one_line(done.stderr) or 'no answer'}")
        status = int(lines[0].split()[1])
        if status in (401, 403, 429) or status >= 500:
            return Fault(f"GitHub answered {status}: {one_line(done.stderr)}")
        tag = next(
            (
                line.split(":", 1)[1].strip()
                for line in lines[1:]
                if line.lower().startswith("etag:")
            ),
            None,
        )
        try:
            parsed = json.loads(body) if body.strip() else None
        except ValueError:
            return Fault(f"GitHub answered {status} with no JSON")
        return status, tag, parsed
