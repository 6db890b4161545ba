"""The one way the orchestrator runs git in a task's workspace.

The repository is the worker's, and so are its `.git/config` (and any file
it includes), `.gitattributes` and `.git/info/attributes`. Git reads them
whatever we do, and many of their keys name a command git runs: the
fsmonitor, hooks, a pager, an external diff, textconv and filter drivers,
ssh and credential helpers, an editor. Run from the tick or the gate, such a
command would run in our process's place: outside any worker's process
group and timeout, with our environment (the database URL, the secrets
`env_deny` keeps from workers). So every call here:

- overrides each command-running key in the command scope
  (`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`, which git
  reads after the repository's own config, so they win over it and over
  anything it includes): the fixed `SAFE_CONFIG`, plus an empty clean,
  smudge and process command for every filter driver the repository's
  config names (the driver names are free text, hence the environment
  form rather than `-c`, whose `key=value` would split at a `=` in one);
- adds the flags a subcommand needs to run no driver (`--no-ext-diff`,
  `--no-textconv`, no submodule recursion; `_FLAGS`);
- ignores the system and global config, replace refs and lazy fetches,
  and never pages or prompts;
- runs with a minimal environment of its own (`git_environment`), not the
  caller's, so nothing git might still start sees our settings;
- caps git's memory (`gitprocess.DATA_LIMIT`), reads stdin from /dev/null, keeps at
  most `limit` bytes of output and kills the command's whole process group
  at one deadline shared by all of a `SafeGit`'s calls (an `include.path`
  naming a FIFO hangs every command).

A scan sees the config as it is when it runs; a process writing the config
between a scan and a later call (a worker's leftover, another task's worker
running meanwhile) is beyond it, and the sandbox is the answer to that. An
operation of several steps scans again after running anything of the
worker's (the landing, after its check).

The config itself cannot be switched off (git has no such option), and
`--git-dir`/`--work-tree` keep a `core.worktree` or a `.git` file from
pointing git anywhere else.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator import safefs
from orchestrator.errors import OrchestratorError
from orchestrator.workspace.gitprocess import GitResult, run_bounded

GIT_TIMEOUT = 30.0
OUTPUT_LIMIT = 64 << 20  # bytes of stdout kept; past it the command is stopped

# Command-scope settings that win over the repository's. An empty helper,
# askpass or filter command is "none"; `protocol.allow=never` stops any
# transport (a partial clone's lazy fetch would start ssh or a remote helper).
SAFE_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", os.devnull),
    ("core.pager", "cat"),
    ("core.attributesFile", os.devnull),
    ("core.excludesFile", os.devnull),
    ("core.untrackedCache", "false"),
    # A file above it is "Binary files differ" to diff: the worker's tiny
    # threshold would hide every change from the page. (git's default.)
    ("core.bigFileThreshold", "512m"),
    # Read whole before a diff: /dev/zero there grows git without end.
    ("diff.orderFile", os.devnull),
    # The worker's `true` makes `makefile` the tracked `Makefile` to git:
    # neither untracked nor changed, so the gate would not show it.
    ("core.ignoreCase", "false"),
    ("core.askPass", ""),
    ("core.useReplaceRefs", "false"),
    ("diff.external", ""),
    ("credential.helper", ""),
    ("protocol.allow", "never"),
    # The orchestrator's own commits (a task is a branch): never signed,
    # so no signing program the config names runs.
    ("commit.gpgSign", "false"),
    ("gpg.program", "false"),
    # Nor is a signature checked (a `log` would run the verifying program
    # the config names for an SSH or X.509 signature a worker wrote).
    ("log.showSignature", "false"),
    ("merge.verifySignatures", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    # A checkout (`read-tree -u`, `reset --hard`, a rebase) stays out of
    # submodules, whose own config (`.git/modules/NAME/config`) no scan reads.
    ("submodule.recurse", "false"),
)
# Flags a subcommand needs so that no driver runs; inserted right after it.
_FLAGS: dict[str, tuple[str, ...]] = {
    "diff": (
        "--no-ext-diff",
        "--no-textconv",
        "--no-color",
        "--ignore-submodules=dirty",
        "--submodule=short",
    ),
    "status": ("--ignore-submodules=dirty",),
}
_MERGE_DRIVER = "git merge-file --marker-size=%L %A %O %B"
_FILTER_SETTINGS = (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false"))


def git_environment() -> dict[str, str]:
    """All the environment a workspace's git gets: PATH to find git, and
    settings that keep it from reading anything but the repository."""
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "LC_ALL": "C",
        "HOME": os.devnull,  # no ~/.gitconfig, ~/.config/git/{ignore,attributes}
        "XDG_CONFIG_HOME": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_NO_REPLACE_OBJECTS": "1",  # refs/replace/<base> could swap the diff's base
        "GIT_NO_LAZY_FETCH": "1",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
        "GIT_EDITOR": ":",  # git starts no editor when it is ":"
        "GIT_SEQUENCE_EDITOR": ":",
    }


class SafeGit:
    """One workspace's git, every call under one deadline. Its git folder is
    the workspace's own `.git`, or `git_dir` when the caller knows better: a
    worktree's `.git` is a file the worker can rewrite, so the orchestrator
    names the worktree's folder from the repository's side. `env` adds to
    the minimal environment (a commit's identity, a throwaway index)."""

    def __init__(
        self,
        workspace: Path,
        *,
        timeout: float = GIT_TIMEOUT,
        git_dir: Path | None = None,
        env: dict[str, str] | None = None,
        config: Sequence[tuple[str, str]] = (),
        step_timeout: float | None = None,
        _scan: _Scan | None = None,
    ) -> None:
        self.workspace = workspace
        # Each call's own bound within the shared one, for operations whose
        # every step may take a step's time (a large repository's add).
        self.step_timeout = step_timeout
        self.git_dir = workspace / ".git" if git_dir is None else git_dir
        self.extra_env = dict(env or {})
        self.deadline = time.monotonic() + timeout
        # `config` comes after SAFE_CONFIG, so a caller may loosen it (a push
        # lets its transports through) but never by the repository's say.
        self._caller_config = tuple(config)
        self._config: list[tuple[str, str]] = [*SAFE_CONFIG, *config]
        self._scan = _scan if _scan is not None else self._filter_drivers()
        self.usable = self._scan is not None
        filters, merges = (self._scan.filters, self._scan.merges) if self._scan else ((), ())
        for driver in filters:
            self._config += [(f"filter.{driver}.{k}", v) for k, v in _FILTER_SETTINGS]
        # A merge driver (a rebase's, a cherry-pick's) is a command too: ours,
        # git's own three-way merge, stands in for each one named.
        self._config += [(f"merge.{driver}.driver", _MERGE_DRIVER) for driver in merges]

    def beside(
        self,
        workspace: Path,
        *,
        git_dir: Path | None = None,
        env: dict[str, str] | None = None,
        timeout: float = GIT_TIMEOUT,
    ) -> SafeGit:
        """Git for another working tree of the same repository (the main one
        beside a worktree), without a second config scan when that one
        would read the very config this one read: the same common git
        folder, and no include or per-worktree config (each could differ
        between the two). Otherwise it scans its own."""
        other = workspace / ".git" if git_dir is None else git_dir
        scan = self._scan
        same = (
            scan is not None and scan.portable and _common_dir(other) == _common_dir(self.git_dir)
        )
        return SafeGit(
            workspace,
            timeout=timeout,
            git_dir=git_dir,
            env=env,
            config=self._caller_config,
            _scan=scan if same else None,
        )

    def argv(self, *args: str) -> list[str]:
        where = [
            "-C",
            str(self.workspace),
            f"--git-dir={self.git_dir}",  # no search up the parents
            f"--work-tree={self.workspace}",  # not the config's core.worktree
        ]
        if args and args[0] in _FLAGS:
            args = (args[0], *_FLAGS[args[0]], *args[1:])
        return ["git", "--no-pager", *where, *args]

    def environment(self) -> dict[str, str]:
        env = {**git_environment(), **self.extra_env}
        env["GIT_CONFIG_COUNT"] = str(len(self._config))
        for index, (key, value) in enumerate(self._config):
            env[f"GIT_CONFIG_KEY_{index}"] = key
            env[f"GIT_CONFIG_VALUE_{index}"] = value
        return env

    def run(self, *args: str, limit: int = OUTPUT_LIMIT) -> GitResult:
        if not self.usable:
            return GitResult(None, b"", error="the repository's config cannot be read")
        return self._run(list(args), limit)

    def out(self, *args: str, limit: int = OUTPUT_LIMIT) -> bytes | None:
        """Stdout of a call that succeeded whole, else None."""
        done = self.run(*args, limit=limit)
        return done.stdout if done.ok else None

    def _run(self, args: list[str], limit: int) -> GitResult:
        deadline = self.deadline
        if self.step_timeout is not None:
            deadline = min(deadline, time.monotonic() + self.step_timeout)
        if deadline - time.monotonic() <= 0:
            return GitResult(None, b"", error="out of time")
        return run_bounded(self.argv(*args), self.environment(), limit, deadline)

    def _filter_drivers(self) -> _Scan | None:
        """Every filter and merge driver the repository's config (includes too) names;
        None when the config cannot be read, or our overrides did not come
        last (a git before 2.31 ignores `GIT_CONFIG_COUNT`): then no git
        command is safe to run."""
        pattern = (
            r"^(filter\..*|merge\..*\.driver|core\.hookspath"
            r"|include\..*|includeif\..*|extensions\.worktreeconfig)$"
        )
        done = self._run(["config", "--null", "--get-regexp", pattern], 1 << 20)
        if done.status != 0:
            return None
        drivers: set[str] = set()
        merges: set[str] = set()
        hooks_path = None
        portable = True
        for record in done.stdout.decode("utf-8", "surrogateescape").split("\0"):
            key, _, value = record.partition("\n")
            if key == "core.hookspath":
                hooks_path = value
            elif key.startswith("filter."):
                drivers.add(key.removeprefix("filter.").rpartition(".")[0])
            elif key.startswith("merge.") and key.endswith(".driver"):
                merges.add(key.removeprefix("merge.").removesuffix(".driver"))
            elif key:
                portable = False  # an include, or config per worktree
        if hooks_path != os.devnull:
            return None
        return _Scan(tuple(sorted(drivers)), tuple(sorted(merges)), portable)


@dataclass(frozen=True)
class _Scan:
    """What a repository's config names that would run a command."""

    filters: tuple[str, ...]
    merges: tuple[str, ...]
    # Read from the common config alone (no include, no config.worktree):
    # every working tree of the repository reads the same.
    portable: bool


_COMMONDIR_BYTES = 4096  # a `commondir` record: one path


def _common_dir(git_dir: Path) -> str | None:
    """The repository's own git folder that `git_dir` shares, as git finds
    it (its `commondir` record, which a worktree's folder holds: git trims
    only the line ends, and takes a relative path from `git_dir`); None
    when the record is anything git might read otherwise (a link, longer
    than a path, a NUL, spaces at its ends): then no scan is shared."""
    try:
        raw = safefs.read_bytes(git_dir / "commondir", _COMMONDIR_BYTES + 1)
    except FileNotFoundError:
        return os.path.realpath(git_dir)
    except OSError:
        return None
    record = raw.rstrip(b"\r\n")
    if len(raw) > _COMMONDIR_BYTES or not record or b"\0" in record or record != record.strip():
        return None
    try:
        return os.path.realpath(git_dir / os.fsdecode(record), strict=True)
    except (OSError, ValueError):
        return None


class GitError(OrchestratorError):
    """A git step of the orchestrator's own (a worktree, a stage commit)
    failed: refused (exit 1) with git's one line."""


STEP_TIMEOUT = 120.0  # a worktree's checkout or `add --all` of a large repository


class GitSteps:
    """Several steps of the orchestrator's own on one git folder, sharing one
    `SafeGit` (its filter lookup and its deadline): each step's stdout, or
    GitError naming the command and git's reason."""

    def __init__(
        self,
        where: Path,
        *,
        git_dir: Path | None = None,
        env: dict[str, str] | None = None,
        timeout: float = STEP_TIMEOUT,
        step_timeout: float | None = None,
        git: SafeGit | None = None,
    ) -> None:
        self.where = where
        self.git = git or SafeGit(
            where, timeout=timeout, git_dir=git_dir, env=env, step_timeout=step_timeout
        )
        if not self.git.usable:
            raise GitError(f"git cannot read the repository's config in {where}")

    def beside(
        self, where: Path, *, git_dir: Path | None = None, env: dict[str, str] | None = None
    ) -> GitSteps:
        """Steps in another working tree of the same repository (`SafeGit.beside`)."""
        left = max(0.0, self.git.deadline - time.monotonic())
        return GitSteps(where, git=self.git.beside(where, git_dir=git_dir, env=env, timeout=left))

    def __call__(self, *args: str) -> str:
        done = self.git.run(*args)
        if not done.ok:
            raise GitError(f"git {args[0]} failed in {self.where}: {self._why(done)}")
        return done.stdout.decode("utf-8", "surrogateescape")

    def head(self, *args: str, limit: int) -> tuple[str, bool]:
        """The first `limit` bytes of a step's output, and whether it was cut."""
        done = self.git.run(*args, limit=limit)
        if done.status != 0 and not done.truncated:
            raise GitError(f"git {args[0]} failed in {self.where}: {self._why(done)}")
        return done.stdout.decode("utf-8", "replace"), done.truncated

    @staticmethod
    def _why(done: GitResult) -> str:
        return done.error or f"exit {done.status}"


def run_git(
    where: Path,
    args: Sequence[str],
    *,
    git_dir: Path | None = None,
    env: dict[str, str] | None = None,
) -> str:
    """One step of the orchestrator's own (`GitSteps`)."""
    return GitSteps(where, git_dir=git_dir, env=env)(*args)
