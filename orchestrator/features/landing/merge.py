"""`land = "merge"`: rebase the task's branch onto the base branch's tip,
run `land_check` there, and move the base branch to the rebased tip only if
it still points where it pointed before (`git update-ref BASE NEW OLD`).

The caller holds the repository's landing lock (`landing.py`); this
module only speaks git, in the task's worktree and the main repository,
through `SafeGit` (no hook, no user config, no command the repository's
config names). Run again after a kill at any point, it finishes the
landing once, by looking rather than remembering:

- a rebase left half done (killed inside it) is aborted first;
- a branch already in the base (killed after the ref moved, before the
  record) is landed: nothing moves again;
- a branch already on the base's tip (killed after the rebase, before the
  ref moved) is not rebased again: its check runs and the ref moves.

The ref moves only after the request's `commit_point` recorded the
intent (the task still landing); a person's halt or cancel before it leaves
the base and the branch as they were (`Stopped`).

A conflict or a failing check leaves the branch where it was before this
call (the rebase aborted, or the branch reset to its old tip) and answers
`SendBack`. The base branch checked out in the main repository's working
tree is moved as git's `receive.denyCurrentBranch = updateInstead` moves it:
a clean checkout follows the ref; one with local changes refuses the
landing (docs/decisions/landing.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from orchestrator.features.landing.model import (
    Landed,
    LandOutcome,
    LandRequest,
    Refused,
    SendBack,
    Stopped,
)
from orchestrator.runner.capture import ProcessResult
from orchestrator.runner.command import run_command
from orchestrator.testing import fault_point
from orchestrator.workspace.gitrun import GitError, GitSteps
from orchestrator.workspace.worktree import Identity, Worktree, checked_out_ref

TAIL_CHARS = 2000  # of a failing check's output, for the next attempt's hint
MAX_FILES = 20  # conflicting files named in a hint
CAS_TRIES = 3  # the base moved under us (a lock's lease lost): rebase again


def land_merge(request: LandRequest) -> LandOutcome:
    try:
        return _Merge(request).land()
    except GitError as exc:
        return Refused(f"merge landing: {exc}")


class _Merge:
    def __init__(self, request: LandRequest) -> None:
        self.request = request
        self.base_ref = f"refs/heads/{request.base_branch}"
        self.branch_ref = f"refs/heads/{request.branch}"
        tree = Worktree(request.repository, request.worktree, request.branch, "")
        if not request.worktree.is_dir() or request.worktree.is_symlink():
            raise GitError(f"the task's worktree {request.worktree} is gone")
        self.admin = tree.admin_dir()
        identity = Identity.parse(request.committer) or Identity.parse(
            "orchestrator <orchestrator@localhost>"
        )
        assert identity is not None
        self.env = identity.environment()
        self._open_git()

    def _open_git(self) -> None:
        """The worktree's and the main tree's git, with a scan of the config
        as it is now and a deadline of their own."""
        request = self.request
        self.work = GitSteps(
            request.worktree, git_dir=self.admin, env=self.env, timeout=request.timeout
        )
        self.repo = self.work.beside(request.repository)

    def land(self) -> LandOutcome:
        self._finish_killed_rebase()
        head = (
            checked_out_ref(self.admin, self.branch_ref)
            or self.work("rev-parse", "--symbolic-full-name", "HEAD").strip()
        )
        if head != self.branch_ref:
            # Detached, git names HEAD itself.
            what = head if head.startswith("refs/") else "a detached HEAD"
            return Refused(
                f"{self.request.worktree} has {what} checked out, "
                f"not {self.request.branch}; check it out there, then resume"
            )
        for _ in range(CAS_TRIES):
            outcome = self._try_once()
            if outcome is not None:
                return outcome
        return Refused(
            f"{self.request.base_branch} moved under every landing try ({CAS_TRIES}); "
            "is something else writing to it?"
        )

    def _try_once(self) -> LandOutcome | None:
        """One rebase, check and compare-and-set; None when the base moved
        between the rebase and the ref move (try again)."""
        # The two tips, then their merge bases (`A...B` adds `^<base>` for
        # each): one git call where `rev-parse` and `merge-base` were two.
        listed = self.work(
            "rev-parse", self.base_ref, self.branch_ref, f"{self.base_ref}...{self.branch_ref}"
        ).split()
        base, old = listed[:2]
        merge_bases = {line[1:] for line in listed[2:] if line.startswith("^")}
        if not merge_bases:
            raise GitError(
                f"{self.request.branch} shares no history with {self.request.base_branch}"
            )
        if old in merge_bases:
            follow_killed_move(self.repo, self._worktrees(), self.request.base_branch, base)
            return Landed(commit=old)  # in the base already: a landing that was not recorded
        if base in merge_bases:
            new = old  # on the base's tip already (rebased before a kill, or never behind)
        else:
            conflict = self._rebase(base, old)
            if conflict is not None:
                return conflict
        # One `worktree list` says both where the base is checked out and
        # the rebased tip (the branch's HEAD), where a `rev-parse` was one
        # more git process. The tip is read before the check runs the
        # branch's code: what lands is what was checked.
        trees = self._worktrees()
        new = old if base in merge_bases else (trees.tip(self.branch_ref) or self._head())
        fault_point("land_after_rebase")
        failed = self._check(old)
        if failed is not None:
            return failed
        if self.request.check:  # the check ran the branch's code: look again
            trees = self._worktrees()
        checkout = trees.main_checkout(self.base_ref, self.request.base_branch)
        if checkout is not None and not self._clean():
            self._reset(old)
            return Refused(
                f"{self.request.base_branch} is checked out in {checkout} with local changes; "
                "commit or stash them there (or check out another branch), then resume"
            )
        if checkout is not None:
            # As `updateInstead`, the checkout is tried before the ref moves:
            # an untracked file in the way must refuse here, not leave the
            # index at the old tip under a moved branch.
            tried = self.repo.git.run("read-tree", "-n", "-m", "-u", base, new)
            if not tried.ok:
                self._reset(old)
                return Refused(
                    f"{self.request.base_branch} is checked out in {checkout} and cannot "
                    f"follow the landing ({tried.error}); move that file away (or check "
                    "out another branch there), then resume"
                )
        # The commit point: the move's intent recorded only while the task
        # is still landing; a person's stop before it wins, after it loses.
        gate = self.request.commit_point
        if gate is not None and not gate.begin(new):
            self._reset(old)
            return Stopped()
        fault_point("land_before_ref_move")
        moved = self.repo.git.run(
            "update-ref", "-m", "orchestrator: land", self.base_ref, new, base
        )
        if not moved.ok:
            if gate is not None:
                gate.abandon()
            return None
        fault_point("land_after_ref_move")
        if checkout is not None:
            # As `updateInstead`: the clean checkout follows its branch. A
            # change made there meanwhile is kept (read-tree refuses).
            self.repo.git.run("read-tree", "-m", "-u", base, new)
        return Landed(commit=new)

    def _finish_killed_rebase(self) -> None:
        if (self.admin / "rebase-merge").exists() or (self.admin / "rebase-apply").exists():
            self.work("rebase", "--abort")

    def _rebase(self, base: str, old: str) -> SendBack | Refused | None:
        done = self.work.git.run(
            "rebase",
            "--quiet",
            "--no-autosquash",
            "--no-autostash",
            "--no-update-refs",
            "--empty=keep",
            base,
        )
        if done.ok:
            return None
        unmerged = self.work.git.out("diff", "--name-only", "--diff-filter=U", "-z") or b""
        files = tuple(
            name for name in unmerged.decode("utf-8", "replace").split("\0") if name.strip()
        )
        self._abort(old)
        if not files:
            return Refused(f"git rebase onto {self.request.base_branch} failed: {done.error}")
        return conflict_sendback(self.request, files)

    def _abort(self, old: str) -> None:
        if (self.admin / "rebase-merge").exists() or (self.admin / "rebase-apply").exists():
            self.work.git.run("rebase", "--abort")
        self._reset(old)

    def _reset(self, old: str) -> None:
        """The branch (and its worktree) back at `old`, as it was."""
        tip = self.work.git.out("rev-parse", "--verify", "HEAD")
        if tip is None or tip.decode().strip() != old:
            self.work("reset", "--quiet", "--hard", old)

    def _check(self, old: str) -> SendBack | None:
        argv = self.request.check
        if not argv:
            return None
        result = run_check(self.request, argv)
        # The check ran the branch's code, which may have written the config
        # (a filter for the checkout to come), and took the time it took:
        # the steps after it scan again, under a deadline of their own.
        self._open_git()
        if result.ok:
            return None
        self._reset(old)
        return check_sendback(self.request, argv, result)

    def _worktrees(self) -> _Worktrees:
        return _Worktrees(self.repo("worktree", "list", "--porcelain", "-z"))

    def _head(self) -> str:
        """The worktree's HEAD, asked on its own: when the listing did not
        name the branch (never, while the branch is checked out there)."""
        return self.work("rev-parse", "--verify", "HEAD").strip()

    def _clean(self) -> bool:
        status = self.repo.git.out("status", "--porcelain", "--untracked-files=no", "-z")
        return status is not None and status.strip(b"\0") == b""


def follow_killed_move(repo: GitSteps, trees: _Worktrees, base_branch: str, tip: str) -> None:
    """A kill between the ref move and the checkout's update left the
    base's checkout (HEAD at `tip`) with the index and files of the tip
    before: bring them along, as the dead landing would have. Known by
    the base's reflog (our move its last entry) and an index that is
    still exactly the tip before; anything else is left alone."""
    base_ref = f"refs/heads/{base_branch}"
    if trees.main_checkout(base_ref, base_branch) is None:
        return
    said = repo.git.out("log", "-g", "-1", "--format=%gs", base_ref)
    if said is None or said.decode("utf-8", "replace").strip() != "orchestrator: land":
        return
    before = repo.git.out("rev-parse", "--verify", "--quiet", f"{base_ref}@{{1}}")
    if before is None:
        return
    previous = before.decode().strip()
    if previous == tip or not repo.git.run("diff-index", "--cached", "--quiet", previous, "--").ok:
        return
    repo.git.run("read-tree", "-m", "-u", previous, tip)


def run_check(request: LandRequest, argv: Sequence[str]) -> ProcessResult:
    """The land check in the rebased worktree: through the request's own
    runner when it has one (the tick's, which walls a sandboxed pipeline's
    check), else on the host."""
    if request.run_check is not None:
        return request.run_check(argv, request.worktree, request.env, request.timeout)
    return run_command(argv, cwd=request.worktree, env=dict(request.env), timeout=request.timeout)


def check_sendback(request: LandRequest, argv: Sequence[str], result: ProcessResult) -> SendBack:
    """A failing check's hint: why it failed and the tail of its output."""
    if result.timed_out:
        why = f"timed out after {request.timeout:g}s"
    elif result.start_error is not None:
        why = f"could not start: {result.start_error}"
    elif result.signal is not None:
        why = f"was killed by signal {result.signal}"
    else:
        why = f"exited {result.exit_code}"
    tail = (result.stdout + result.stderr).strip()[-TAIL_CHARS:]
    return SendBack(
        hint=(
            f"land_check {list(argv)} {why} on {request.branch} rebased onto "
            f"{request.base_branch}. Its output ends:\n{tail}"
        )
    )


def conflict_sendback(request: LandRequest, files: tuple[str, ...]) -> SendBack:
    """A rebase's conflict: the files, at most `MAX_FILES` named."""
    named = ", ".join(files[:MAX_FILES]) + (" …" if len(files) > MAX_FILES else "")
    return SendBack(
        hint=(
            f"Landing on {request.base_branch} conflicted in: {named}. "
            f"Rebase {request.branch} onto {request.base_branch} "
            "(or change it so it merges) and resolve these files."
        ),
        files=files,
    )


class _Worktrees:
    """`git worktree list --porcelain -z` read: each working tree's path,
    HEAD and branch, the main one first."""

    def __init__(self, listed: str) -> None:
        self.entries: list[tuple[str, str, str]] = []  # (path, HEAD, branch ref or "")
        path = head = branch = ""
        for field in [*listed.split("\0"), ""]:
            if field.startswith("worktree "):
                path, head, branch = field.removeprefix("worktree "), "", ""
            elif field.startswith("HEAD "):
                head = field.removeprefix("HEAD ")
            elif field.startswith("branch "):
                branch = field.removeprefix("branch ")
            elif field == "" and path:  # an entry ends with an empty field
                self.entries.append((path, head, branch))
                path = ""

    def tip(self, ref: str) -> str | None:
        """The HEAD of the working tree that has `ref` checked out."""
        return next((head for _, head, branch in self.entries if branch == ref and head), None)

    def main_checkout(self, ref: str, name: str) -> Path | None:
        """The main working tree, when it has `ref` (the base branch, `name`)
        checked out; GitError when a linked worktree has it instead."""
        for index, (path, _, branch) in enumerate(self.entries):
            if branch == ref:
                if index != 0:
                    raise GitError(
                        f"{name} is checked out in the worktree {path}; "
                        "check out another branch there to land into it"
                    )
                return Path(path)
        return None
