"""GitHub's REST API through `gh api`, as the landing reaches GitHub: the
real `gh`, its login or `GH_TOKEN`, `GH_HOST` for an Enterprise host, run
in an empty folder of its own with an environment of its own.

`get` is conditional: the ETag of the last answer goes out as
`If-None-Match`, and GitHub answers `304 Not Modified` (no body, no rate
limit spent) while nothing changed. `gh api -i` prints the status line and
headers before the body, which is how the status and the ETag are read
(gh 2.23 exits 1 on a 304 and on every error: the status line tells them
apart). A `gh` that cannot answer (not installed, 401, rate limit, 5xx,
timeout) is a `GhFault`: the host's, never the task's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator import runner
from orchestrator.config import PipelineConfig, Settings
from orchestrator.domain.text import one_line

TIMEOUT = 60.0


@dataclass(frozen=True)
class Answer:
    status: int  # 200, 201, 304, 404 ...
    etag: str | None
    body: Any  # the parsed JSON; None on a 304


@dataclass(frozen=True)
class GhFault:
    """`gh` could not get an answer GitHub meant for us: one line, for
    `explain` and the tick's warning; the task is not charged."""

    reason: str


def gh_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """PATH and HOME (gh's own login), settings that keep it from prompting,
    then the pipeline's landing environment (GH_HOST, GH_TOKEN)."""
    base = {key: os.environ[key] for key in ("PATH", "HOME", "LANG") if key in os.environ}
    return {
        **base,
        "GH_PROMPT_DISABLED": "1",
        "GH_NO_UPDATE_NOTIFIER": "1",
        "GH_PAGER": "cat",
        "NO_COLOR": "1",
        **extra,
    }


class GitHubApi:
    """`gh api` for one repository (`OWNER/NAME`)."""

    def __init__(self, repo: str, env: Mapping[str, str], timeout: float = TIMEOUT) -> None:
        self.repo = repo
        self.env = gh_environment(env)
        self.timeout = timeout

    def get(self, path: str, etag: str | None = None) -> Answer | GhFault:
        headers = ("-H", f"If-None-Match: {etag}") if etag else ()
        return self._call("-i", *headers, self._url(path))

    def post(self, path: str, body: str) -> Answer | GhFault:
        return self._call("-i", "--method", "POST", "-f", f"body={body}", self._url(path))

    def user(self) -> Answer | GhFault:
        """The account `gh` speaks as: its comments are never feedback."""
        return self._call("-i", "user")

    def _url(self, path: str) -> str:
        return f"repos/{self.repo}/{path}" if path else f"repos/{self.repo}"

    def _call(self, *args: str) -> Answer | GhFault:
        program = shutil.which("gh", path=self.env.get("PATH"))
        if program is None:
            return GhFault("gh is not installed (following a pull request needs the GitHub CLI)")
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
                return GhFault(f"gh api timed out after {self.timeout:g}s")
            except OSError as exc:
                return GhFault(f"gh could not start: {exc.strerror}")
        return _read(done.stdout, done.stderr)


def _read(out: str, err: str) -> Answer | GhFault:
    head, _, body = out.replace("\r\n", "\n").partition("\n\n")
    lines = head.splitlines()
    if not lines or not lines[0].startswith("HTTP/"):
        return GhFault(f"gh api failed: {one_line(err) or 'no answer'}")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return GhFault(f"gh api printed no status: {one_line(lines[0])}")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if status in (401, 403, 429) or status >= 500:
        reset = headers.get("x-ratelimit-reset")
        until = f" (rate limit resets at {reset})" if reset else ""
        return GhFault(f"GitHub answered {status}{until}: {one_line(err) or one_line(body)}")
    try:
        parsed = json.loads(body) if body.strip() else None
    except ValueError:
        return GhFault(f"GitHub answered {status} with no JSON")
    return Answer(status, headers.get("etag"), parsed)


def task_env(settings: Settings, slug: str, pipeline: PipelineConfig) -> dict[str, str]:
    """As the landing's `gh` gets it: the tick's environment less what
    `child_deny` names, `[orchestrator] env`, the `land_secrets`."""
    sources = settings.secret_sources(os.environ)
    secrets = pipeline.landing.secrets
    return runner.child_environment(
        os.environ,
        deny=settings.child_deny,
        extra={
            **settings.shared_env(os.environ),
            **{name: sources[name] for name in secrets if name in sources},
        },
        orchestrator_vars={"ORCHESTRATOR_TASK": slug},
    )

    # Recording.
