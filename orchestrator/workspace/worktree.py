"""A task is a branch: its workspace is a git worktree of the pipeline's
repository on `task/<slug>`, and each passed stage is a commit on it.

Every step here is safe to run again after a crash at any point, because a
tick killed between two git commands leaves one of a few states, and each
is recognised by looking rather than remembered:

- no branch, no worktree: the worktree is added from the recorded base;
- the branch exists (a worktree add that died after making it, or a
  worktree removed by `prune --finished`): the worktree is added on it,
  never reset, so a stage's commits survive;
- a worktree entry whose folder is gone: `git worktree prune` clears it;
- a worktree git still marks "locked initializing" (its add was killed
  before the checkout, so it has no index and no files): removed and added
  again, never used (a commit there would delete every file);
- HEAD moved off the branch by a worker: refused, never cleared;
- a folder at the workspace's path that is not this worktree: removed
  only when it is empty or git's own half-made checkout (it holds a `.git`
  file naming our worktree); anything else is refused, never deleted.

A stage commit carries an `Orchestrator-Attempt:` trailer naming the
attempt, so a tick killed between `git commit` and recording it finds the
commit on the branch and records it instead of committing twice
(`stage_commit.py`).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from orchestrator import safefs
from orchestrator.workspace.gitfaults import INDEX_LOCK, clear_stale_lock
from orchestrator.workspace.gitrun import STEP_TIMEOUT, GitError, GitSteps, run_git

BRANCH_PREFIX = "task/"
TRAILER = "Orchestrator-Attempt"
DEFAULT_AUTHOR = "orchestrator <orchestrator@localhost>"
_RECORD_BYTES = 4096  # of a `.git` file or a `gitdir` record: one path
# In `_listed`, a worktree `git worktree add` left "locked initializing"
# (killed before its checkout); no branch can have this name.
_HALF_MADE = "\0initializing"


def branch_name(slug: str) -> str:
    return BRANCH_PREFIX + slug


def branch_problem(slug: str) -> str | None:
    """Why git cannot name a valid slug's branch: of git's ref rules, only
    these two are left by the slug's own (letters, digits, `.`, `_`, `-`,
    no `..`, a letter or digit first)."""
    for ending in (".lock", "."):
        if slug.endswith(ending):
            return f"git cannot name a branch {branch_name(slug)!r} (it ends in {ending!r})"
    return None


@dataclass(frozen=True)
class Identity:
    """Who the orchestrator's commits are by (`commit_author` in the pipeline)."""

    name: str
    email: str

    @classmethod
    def parse(cls, text: str) -> Identity | None:
        """`Name <email>`; None when it is not of that shape."""
        name, sep, rest = text.strip().partition("<")
        email = rest.removesuffix(">").strip()
        if not sep or not rest.endswith(">") or not name.strip() or not email:
            return None
        if any(ch in text for ch in "\0\n\r") or "<" in email or ">" in email:
            return None
        return cls(name.strip(), email)

    def environment(self) -> dict[str, str]:
        return {
            "GIT_AUTHOR_NAME": self.name,
            "GIT_AUTHOR_EMAIL": self.email,
            "GIT_COMMITTER_NAME": self.name,
            "GIT_COMMITTER_EMAIL": self.email,
        }


def repository_root(path: Path) -> Path:
    """The top of the repository holding `path`: the nearest folder with a
    `.git` folder. Found by looking, not by asking git to search: git run
    there always gets `--git-dir` (`gitrun.SafeGit`)."""
    for folder in (path, *path.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir() and not dot_git.is_symlink():
            return folder
        if dot_git.exists() or dot_git.is_symlink():
            raise GitError(
                f"{folder} is a worktree or submodule (its .git is not a folder); "
                "name the main repository"
            )
    raise GitError(f"{path} is not inside a git repository")


def current_branch(repository: Path) -> str:
    """The branch checked out in `repository`; a detached HEAD has none."""
    try:
        return run_git(repository, ["symbolic-ref", "--quiet", "--short", "HEAD"]).strip()
    except GitError as exc:
        raise GitError(
            f"{repository} has no branch checked out (detached HEAD); set `base` in the pipeline"
        ) from exc


def branch_tip(repository: Path, branch: str) -> str | None:
    try:
        out = run_git(
            repository, ["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}"]
        )
    except GitError:
        return None
    return out.strip() or None


def checked_out_ref(admin: Path, expected: str) -> str | None:
    """`expected` when the worktree's own HEAD file (in its folder `admin`)
    names that ref, without a git process; None when it says anything
    else (detached, another branch, a ref store git keeps elsewhere), and
    then git is asked, whose answer is the one to report."""
    try:
        text = safefs.read_text(admin / "HEAD", _RECORD_BYTES)
    except OSError:
        return None
    return expected if text == f"ref: {expected}\n" else None


@dataclass(frozen=True)
class Worktree:
    """Where a task's branch is checked out, and what it started from."""

    repository: Path
    workspace: Path
    branch: str
    base_commit: str

    @property
    def real_workspace(self) -> Path:
        """The workspace as git records it (real folders): the project may be
        reached through a link. The last part is never resolved, so a link
        at the workspace's own path is still seen as one."""
        return Path(os.path.realpath(self.workspace.parent)) / self.workspace.name

    def ensure(self) -> None:
        """Make the worktree, or finish what a killed tick began."""
        listed = self._listed()
        here = self.real_workspace
        if listed.get(here) == _HALF_MADE:
            # Git's own mark of an add that never finished its checkout:
            # nothing of a worker's is in it (no attempt ran there).
            run_git(self.repository, ["worktree", "remove", "--force", "--force", str(here)])
            listed = self._listed()
        if here in listed and self.workspace.is_dir() and not self.workspace.is_symlink():
            if listed[here] == self.branch:
                return
            # The worker moved HEAD (detached it, or checked out another
            # branch): its folder is work, never cleared to make it again.
            raise GitError(self.off_branch(listed[here]))
        if here in listed or any(not p.exists() for p in listed):
            run_git(self.repository, ["worktree", "prune"])
        self._clear_half_made()
        if branch_tip(self.repository, self.branch) is None:
            run_git(
                self.repository,
                [
                    "worktree",
                    "add",
                    "--quiet",
                    "-b",
                    self.branch,
                    str(self.workspace),
                    self.base_commit,
                ],
            )
        else:
            run_git(
                self.repository,
                ["worktree", "add", "--quiet", str(self.workspace), self.branch],
            )

    def exists(self) -> bool:
        if self.workspace.is_symlink():
            return False  # a worker swapped it: the branch is the change, not the link
        return self._listed().get(self.real_workspace) == self.branch and self.workspace.is_dir()

    def remove(self) -> bool:
        """Remove the worktree (the branch stays); False when there was none.
        Never forced: a file no commit holds (a person's edit after the
        task finished) makes git refuse, and the worktree is kept. Ignored
        files go with it."""
        if self.real_workspace not in self._listed():
            return False
        run_git(self.repository, ["worktree", "remove", str(self.workspace)])
        return True

    def admin_dir(self) -> Path:
        """The worktree's own git folder, found from the repository's side:
        the `.git` file in the workspace is the worker's to rewrite."""
        wanted = str(self.real_workspace / ".git")
        admin = self.repository / ".git" / "worktrees"
        for entry in sorted(admin.iterdir()) if admin.is_dir() else []:
            gitdir = entry / "gitdir"
            try:
                # The worker's git writes in this folder: a FIFO or a link
                # to /dev/zero there must not hang or fill the tick.
                if safefs.read_text(gitdir, _RECORD_BYTES).strip() == wanted:
                    return entry
            except OSError:
                continue
        raise GitError(f"{self.workspace} is not a worktree of {self.repository}")

    def git(self, args: list[str], env: dict[str, str] | None = None) -> str:
        return self.steps(env)(*args)

    def steps(self, env: dict[str, str] | None = None, *, steps: int = 1) -> GitSteps:
        """Git in the worktree for `steps` steps of one operation, sharing
        one config scan; each step may take a step's time, as on its own."""
        if self.workspace.is_symlink():
            # A worker replaced its folder with a link: git would commit
            # (and the next stage work in) whatever it points at.
            raise GitError(f"{self.workspace} is a link; refusing to follow it")
        return GitSteps(
            self.workspace,
            git_dir=self.admin_dir(),
            env=env,
            timeout=STEP_TIMEOUT * steps,
            step_timeout=STEP_TIMEOUT,
        )

    def head(self) -> str:
        return self.git(["rev-parse", "--verify", "HEAD"]).strip()

    def clear_stale_lock(self, started: float, admin: Path | None = None) -> Path | None:
        """The worktree's `index.lock`, removed when its owner is gone
        (`gitfaults.clear_stale_lock`: no process holds it or works here,
        older than `started`); the path when it was removed, else None."""
        admin = admin or self.admin_dir()
        lock = admin / INDEX_LOCK
        return lock if clear_stale_lock(lock, [self.real_workspace, admin], started) else None

    def off_branch(self, on: str) -> str:
        """Why a commit here is refused: the workspace is on another branch."""
        what = f"branch {on!r}" if on else "a detached HEAD"
        return (
            f"{self.workspace} has {what} checked out, not {self.branch}; "
            f"check out {self.branch} there to go on"
        )

    def _listed(self) -> dict[Path, str]:
        """Worktree path -> branch ("" when detached, `_HALF_MADE`), from git's own list."""
        out = run_git(self.repository, ["worktree", "list", "--porcelain", "-z"])
        found: dict[Path, str] = {}
        path: Path | None = None
        for field in out.split("\0"):
            if field.startswith("worktree "):
                path = Path(field.removeprefix("worktree "))
                found[path] = ""
            elif field.startswith("branch ") and path is not None:
                found[path] = field.removeprefix("branch refs/heads/")
            elif field == "locked initializing" and path is not None:
                found[path] = _HALF_MADE  # git runs with LC_ALL=C: untranslated
        return found

    def _clear_half_made(self) -> None:
        try:
            entries = list(os.scandir(self.workspace))
        except FileNotFoundError:
            return
        except NotADirectoryError as exc:
            raise GitError(
                f"{self.workspace} is not a folder; refusing to make a worktree there"
            ) from exc
        if self.workspace.is_symlink():
            raise GitError(f"{self.workspace} is a link; refusing to make a worktree there")
        dot_git = self.workspace / ".git"
        ours = (
            dot_git.is_file()
            and not dot_git.is_symlink()
            and _points_into(dot_git, Path(os.path.realpath(self.repository)))
        )
        if entries and not ours:
            raise GitError(f"{self.workspace} exists and is not this task's worktree; move it away")
        shutil.rmtree(self.workspace)


def _points_into(dot_git: Path, repository: Path) -> bool:
    try:
        text = safefs.read_text(dot_git, _RECORD_BYTES)
    except OSError:
        return False
    target = text.strip().removeprefix("gitdir:").strip()
    return target.startswith(str(repository / ".git" / "worktrees") + os.sep)
