"""`land = "pr"`: push the task's branch and open one pull request with `gh`.

Idempotent, because the landing step may be killed anywhere and run again:
the remote branch is read first (`git ls-remote`), and a branch already at
the task's tip is not pushed again; an open pull request for the branch is
looked for (`gh pr list --head`) before one is created. So a retry after a
crash between the push and the pull request, or between the pull request
and the record, pushes nothing twice and opens no second pull request.

Safety, as everywhere git runs on a worker's repository (`SafeGit`): the
push runs with no hooks and no user config; only the file, ssh, http(s)
and git transports are let through, and the remote's own
`receivepack`/`uploadpack` commands and `core.sshCommand` are overridden (the
former by flags: git takes a remote's *first* receivepack value, so config
cannot override it), because they name programs a worker could have written into the shared
config. `gh` runs in an empty folder of its own (it runs `git remote` in its
working folder, which must not be the worker's repository) with
`--repo` given, so it never reads the worktree either.

Only `gh` 2.23 options are used (Debian's): `pr list --head --state --json`,
`pr create --head --base --title --body-file --draft`, `--repo`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.domain.text import clean_text, one_line
from orchestrator.features.landing.model import Landed, LandOutcome, LandRequest, Refused
from orchestrator.testing import fault_point
from orchestrator.workspace.gitrun import SafeGit

# Transports a push may use; every other one (ext::, a remote helper) stays
# off, as `SafeGit`'s `protocol.allow=never` has it.
PUSH_PROTOCOLS = ("file", "ssh", "https", "http", "git")
# The pull request's body stays under GitHub's limit (65536 characters).
BODY_LIMIT = 60000
# `[HOST/]OWNER/REPO` out of a remote's URL (ssh, scp-like or https).
_REPO_URL = re.compile(
    r"^(?:(?:ssh|https?|git)://(?:[^@/]+@)?(?P<host>[^/:]+)(?::\d+)?/"
    r"|(?:[^@/]+@)?(?P<scp>[^/:]+):)"
    r"(?P<owner>[^/]+)/(?P<name>[^/]+?)(?:\.git)?/?$"
)


@dataclass(frozen=True)
class _Ran:
    status: int | None  # None: it did not start or ran out of time
    stdout: str
    error: str  # one line


def open_pull_request(request: LandRequest) -> LandOutcome:
    """Push `request.branch` to `request.remote` and open (or find) its pull
    request: Landed(commit=the pushed tip, url=the pull request), or Refused
    with one line when a person must act (a push refused, `gh` missing or
    unauthenticated, a remote that names no GitHub repository)."""
    git = _push_git(request)
    if not git.usable:
        return Refused("the repository's git config cannot be read")
    tip = _local_tip(git, request.branch)
    if tip is None:
        return Refused(f"branch {request.branch} is not in the repository")
    vcs = git.run("config", "--get", f"remote.{request.remote}.vcs")
    if vcs.ok and vcs.stdout.strip():
        return Refused(f"remote {request.remote} uses a remote helper; refusing to push through it")
    remote_tip = _remote_tip(git, request.remote, request.branch)
    if isinstance(remote_tip, Refused):
        return remote_tip
    if remote_tip != tip:  # a retry finds it pushed already and pushes nothing
        receive_pack = _receive_pack(git, request.remote)
        if isinstance(receive_pack, Refused):
            return receive_pack
        pushed = git.run(
            "push",
            "--porcelain",
            "--no-verify",
            # A flag, not config: git takes a remote's first receivepack value.
            f"--receive-pack={receive_pack}",
            request.remote,
            f"{tip}:refs/heads/{request.branch}",
        )
        if not pushed.ok:
            return Refused(
                f"git push to {request.remote} refused: {pushed.error or 'no reason given'}"
            )
    fault_point("pr_after_push")
    gh = _Gh.find(request)
    if isinstance(gh, Refused):
        return gh
    url = gh.existing(request.branch)
    if isinstance(url, Refused):
        return url
    if url is None:
        url = gh.create(request)
        if isinstance(url, Refused):
            return url
        fault_point("pr_after_create")
    return Landed(commit=tip, url=url)


def pull_request_body(request: LandRequest) -> str:
    """The task's text, then each passed stage's verdict reasons."""
    parts = [request.body.strip()] if request.body.strip() else []
    lines = []
    for stage in request.stages:
        score = "" if stage.score is None else f" (score {stage.score:.2f})"
        lines.append(f"- **{stage.stage}**{score}")
        lines += [f"  - {one_line(reason)}" for reason in stage.reasons if reason.strip()]
    if lines:
        parts.append("### Stages\n\n" + "\n".join(lines))
    parts.append(f"Opened by orchestrator for task `{request.slug}`.")
    return clean_text("\n\n".join(parts), BODY_LIMIT)


def github_repository(url: str, host: str | None = None) -> str | None:
    """`HOST/OWNER/NAME` (or `OWNER/NAME`) of a remote URL; None when it names none."""
    match = _REPO_URL.match(url.strip())
    if match is None:
        return None
    found = match.group("host") or match.group("scp")
    owner, name = match.group("owner"), match.group("name")
    return f"{host or found}/{owner}/{name}"


def _push_git(request: LandRequest) -> SafeGit:
    """The repository's git, allowed to push: real transports only, none of
    the remote's own commands."""
    allowed = [(f"protocol.{name}.allow", "always") for name in PUSH_PROTOCOLS]
    config = [
        *allowed,
        ("core.sshCommand", "ssh"),
        ("push.recurseSubmodules", "no"),
        ("push.gpgSign", "false"),
    ]
    return SafeGit(
        request.repository, timeout=request.timeout, env=dict(request.env), config=config
    )


def _receive_pack(git: SafeGit, remote: str) -> str | Refused:
    """The receive-pack a push runs. A push to a path on this machine runs
    the receiving repository's hooks in our process's place, and which
    repository that is the shared config says (a `pushurl`, an
    `insteadOf` a worker wrote): so such a push runs receive-pack with
    hooks off. Over a network the server's hooks are the server's."""
    listed = git.run("remote", "get-url", "--push", "--all", remote)
    if not listed.ok:
        return Refused(f"cannot read remote {remote}: {listed.error or 'git remote failed'}")
    urls = listed.stdout.decode("utf-8", "replace").split()
    local = [_is_local(url) for url in urls]
    if all(local):
        return f"git -c core.hooksPath={os.devnull} receive-pack"
    if any(local):
        return Refused(f"remote {remote} pushes both to this machine and over a network")
    return "git-receive-pack"


def _is_local(url: str) -> bool:
    """As git tells a path from a network URL (`url.c`, `connect.c`)."""
    if url.startswith("file://"):
        return True
    if "://" in url:
        return False
    colon, slash = url.find(":"), url.find("/")
    return colon < 0 or (0 <= slash < colon)


def _local_tip(git: SafeGit, branch: str) -> str | None:
    out = git.out("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}")
    return None if out is None else out.decode().strip() or None


def _remote_tip(git: SafeGit, remote: str, branch: str) -> str | Refused | None:
    """The remote branch's commit (None: it has no such branch)."""
    listed = git.run(
        "ls-remote", "--upload-pack=git-upload-pack", "--heads", remote, f"refs/heads/{branch}"
    )
    if not listed.ok:
        return Refused(f"cannot read remote {remote}: {listed.error or 'git ls-remote failed'}")
    for line in listed.stdout.decode("utf-8", "replace").splitlines():
        sha, _, ref = line.partition("\t")
        if ref == f"refs/heads/{branch}":
            return sha
    return None


class _Gh:
    """The `gh` CLI, in a folder of its own, with the landing's environment."""

    def __init__(self, program: str, repo: str, env: dict[str, str], timeout: float) -> None:
        self.program = program
        self.repo = repo
        self.env = env
        self.timeout = timeout

    @classmethod
    def find(cls, request: LandRequest) -> _Gh | Refused:
        env = gh_environment(request.env)
        program = shutil.which("gh", path=env.get("PATH"))
        if program is None:
            return Refused('gh is not installed (land = "pr" needs the GitHub CLI on PATH)')
        repo = request.env.get("GH_REPO") or _repository_of(request)
        if repo is None:
            return Refused(
                f"remote {request.remote} names no GitHub repository; set GH_REPO to OWNER/NAME"
            )
        return cls(program, repo, env, request.timeout)

    def existing(self, branch: str) -> str | Refused | None:
        """The open pull request's URL for `branch`, if there is one."""
        listed = self._run(
            "pr", "list", "--head", branch, "--state", "open", "--json", "url,headRefName"
        )
        if listed.status != 0:
            return Refused(f"gh pr list failed: {listed.error}")
        try:
            found = json.loads(listed.stdout or "[]")
        except ValueError:
            return Refused("gh pr list printed no JSON")
        for item in found if isinstance(found, list) else []:
            if isinstance(item, dict) and item.get("headRefName", branch) == branch:
                url = item.get("url")
                if isinstance(url, str) and url:
                    return url
        return None

    def create(self, request: LandRequest) -> str | Refused:
        argv = [
            "pr",
            "create",
            "--head",
            request.branch,
            "--base",
            request.base_branch,
            "--title",
            one_line(request.title) or request.slug,
            "--body-file",
            "-",
        ]
        if request.draft:
            argv.append("--draft")
        made = self._run(*argv, stdin=pull_request_body(request))
        urls = [line for line in made.stdout.split() if line.startswith(("http://", "https://"))]
        if made.status == 0 and urls:
            return urls[-1]
        # Opened meanwhile (another host's landing): the one that exists is ours.
        found = self.existing(request.branch)
        if isinstance(found, str):
            return found
        return Refused(f"gh pr create failed: {made.error or 'no pull request URL printed'}")

    def _run(self, *args: str, stdin: str | None = None) -> _Ran:
        with tempfile.TemporaryDirectory(prefix="orchestrator-gh-") as folder:
            env = {**self.env, "GIT_CEILING_DIRECTORIES": str(Path(folder).parent)}
            try:
                done = subprocess.run(  # noqa: PLW1510 - the status is read below
                    [self.program, *args, "--repo", self.repo],
                    cwd=folder,
                    env=env,
                    input=stdin if stdin is not None else "",
                    capture_output=True,
                    text=True,
                    timeout=self.timeout,
                    start_new_session=True,
                )
            except subprocess.TimeoutExpired:
                return _Ran(None, "", f"gh {args[0]} {args[1]} timed out after {self.timeout:g}s")
            except OSError as exc:
                return _Ran(None, "", f"gh could not start: {exc.strerror}")
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        error = one_line(lines[0]) if lines else f"exit status {done.returncode}"
        return _Ran(done.returncode, done.stdout, "" if done.returncode == 0 else error)


def gh_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """What `gh` sees: PATH and HOME (its own login, `gh auth login`), a few
    settings that keep it from prompting or paging, and the landing's
    environment (GH_HOST, GH_TOKEN, GH_REPO); nothing else of the tick's."""
    base = {key: os.environ[key] for key in ("PATH", "HOME", "LANG") if key in os.environ}
    return {
        **base,
        "GH_PROMPT_DISABLED": "1",
        "GH_NO_UPDATE_NOTIFIER": "1",
        "GH_PAGER": "cat",
        "NO_COLOR": "1",
        "GIT_TERMINAL_PROMPT": "0",
        **extra,
    }


def _repository_of(request: LandRequest) -> str | None:
    git = SafeGit(request.repository, timeout=request.timeout)
    url = git.out("config", "--get", f"remote.{request.remote}.url")
    text = request.remote if url is None else url.decode("utf-8", "replace").strip()
    return github_repository(text, request.env.get("GH_HOST"))


__all__: Sequence[str] = [
    "gh_environment",
    "github_repository",
    "open_pull_request",
    "pull_request_body",
]
