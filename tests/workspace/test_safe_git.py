"""No git configuration a worker writes runs a command in the tick or at the gate
(issue 22, item 2).

Each case plants one of git's command-running keys in a real workspace's
repository, pointing at a script that dumps its environment into a marker
file. A real tick (whose no-progress guard fingerprints the workspace and
which records the stage's starting commit), `show` and `report --html` then
run through the CLI: the marker must never appear. Afterwards plain git runs
the command the key is for in the same repository, and the marker appears:
the plant was live, so its absence before proves the protection, not a dud.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import Project

from orchestrator.workspace import gitprocess
from orchestrator.workspace.gitrun import SafeGit, git_environment

GIT_AS_T = ("git", "-c", "user.name=t", "-c", "user.email=t@example.invalid")
HOOKS = ("pre-commit", "post-index-change", "reference-transaction", "post-checkout")


@dataclass(frozen=True)
class Plant:
    name: str
    plant: Callable[[Path, Path], None]  # (workspace, script)
    control: tuple[str, ...] | None  # plain git args that run it; None: nothing we can run
    tty: bool = False  # a pager runs only when stdout is a terminal


def _config(*pairs: str) -> Callable[[Path, Path], None]:
    """Set `key value` pairs in the repository's own config; `{}` is the script."""

    def plant(workspace: Path, script: Path) -> None:
        for pair in pairs:
            key, _, value = pair.partition(" ")
            _git(workspace, "config", key, value.replace("{}", str(script)))

    return plant


def _with_attributes(
    line: str, inner: Callable[[Path, Path], None]
) -> Callable[[Path, Path], None]:
    def plant(workspace: Path, script: Path) -> None:
        # .git/info/attributes: never shown at the gate, and no tracked change.
        (workspace / ".git" / "info").mkdir(exist_ok=True)
        (workspace / ".git" / "info" / "attributes").write_text(line + "\n")
        inner(workspace, script)

    return plant


def _hooks(where: str) -> Callable[[Path, Path], None]:
    def plant(workspace: Path, script: Path) -> None:
        folder = workspace / ".git" / "hooks" if where == "hooks" else workspace / where
        folder.mkdir(parents=True, exist_ok=True)
        for hook in HOOKS:
            (folder / hook).write_bytes(script.read_bytes())
            (folder / hook).chmod(0o755)
        if where != "hooks":
            _git(workspace, "config", "core.hooksPath", str(folder))

    return plant


def _include(conditional: bool) -> Callable[[Path, Path], None]:
    def plant(workspace: Path, script: Path) -> None:
        included = workspace / ".git" / "more.config"
        included.write_text(f"[core]\n\tfsmonitor = {script}\n")
        key = f"includeIf.gitdir:{workspace}/.git.path" if conditional else "include.path"
        _git(workspace, "config", key, str(included))

    return plant


def _worktree_config(workspace: Path, script: Path) -> None:
    _git(workspace, "config", "extensions.worktreeConfig", "true")
    _git(workspace, "config", "--worktree", "core.fsmonitor", str(script))


def _submodule(workspace: Path, script: Path) -> None:
    """A dirty submodule whose own config names the fsmonitor: a plain
    `git status` runs `git status` inside it, with that config."""
    other = workspace.parent.parent / "sub-origin"
    _git(workspace.parent, "init", "-q", str(other))
    _git(other, "commit", "-q", "--allow-empty", "-m", "sub")
    _git(workspace, "-c", "protocol.file.allow=always", "submodule", "-q", "add", str(other), "sub")
    _git(workspace, "commit", "-qm", "with a submodule")
    (workspace / "sub" / "dirty.txt").write_text("dirty\n")
    _git(workspace / "sub", "config", "core.fsmonitor", str(script))


PLANTS = [
    Plant("core.fsmonitor", _config("core.fsmonitor {}"), ("status",)),
    Plant("include.path", _include(conditional=False), ("status",)),
    Plant("includeIf", _include(conditional=True), ("status",)),
    Plant("config.worktree", _worktree_config, ("status",)),
    Plant("submodule's core.fsmonitor", _submodule, ("status",)),
    Plant("hooks", _hooks("hooks"), ("commit", "--allow-empty", "-qm", "x")),
    Plant("core.hooksPath", _hooks("elsewhere-hooks"), ("commit", "--allow-empty", "-qm", "x")),
    Plant("core.pager", _config("core.pager {}"), ("-p", "log", "-1"), tty=True),
    Plant("pager.diff", _config("pager.diff {}"), ("diff",), tty=True),
    Plant("pager.status", _config("pager.status {}"), ("status",), tty=True),
    Plant("diff.external", _config("diff.external {}"), ("diff",)),
    Plant(
        "diff.<driver>.command",
        _with_attributes("* diff=evil", _config("diff.evil.command {}")),
        ("diff",),
    ),
    Plant(
        "diff.<driver>.textconv",
        _with_attributes("* diff=evil", _config("diff.evil.textconv {}")),
        ("diff",),
    ),
    Plant(
        "filter.<driver>.clean",
        _with_attributes(
            "* filter=evil", _config("filter.evil.clean {}", "filter.evil.required true")
        ),
        ("diff",),
    ),
    Plant(
        "filter.<driver>.process",
        _with_attributes("* filter=evil", _config("filter.evil.process {}")),
        ("diff",),
    ),
    Plant(
        "filter.<driver>.smudge",
        _with_attributes("* filter=evil", _config("filter.evil.smudge {}")),
        ("checkout", "--", "plan.txt"),
    ),
    Plant(
        "merge.<driver>.driver",
        _with_attributes("* merge=evil", _config("merge.evil.driver {}")),
        None,
    ),
    Plant(
        "core.sshCommand", _config("core.sshCommand {}"), ("ls-remote", "ssh://example.invalid/x")
    ),
    Plant("core.gitProxy", _config("core.gitProxy {}"), ("ls-remote", "git://example.invalid/x")),
    Plant(
        "remote.<name>.uploadpack",
        _config("remote.origin.url .", "remote.origin.uploadpack {}"),
        ("fetch", "-q", "origin"),
    ),
    Plant(
        "ext:: remote",
        _config("protocol.ext.allow always", "remote.origin.url ext::{} %S no-such-file"),
        ("fetch", "-q", "origin"),
    ),
    Plant("credential.helper", _config("credential.helper !{}"), None),
    Plant("core.askPass", _config("core.askPass {}"), None),
    Plant("gpg.program", _config("gpg.program {}"), ("commit", "-S", "--allow-empty", "-qm", "x")),
    Plant("core.editor", _config("core.editor {}"), ("commit", "--allow-empty", "-q")),
    Plant("sequence.editor", _config("sequence.editor {}"), None),
    Plant("core.alternateRefsCommand", _config("core.alternateRefsCommand {}"), None),
    Plant("uploadpack.packObjectsHook", _config("uploadpack.packObjectsHook {}"), None),
]


def _git(workspace: Path, *args: str) -> None:
    subprocess.run([*GIT_AS_T, "-C", str(workspace), *args], check=True, capture_output=True)


def _script(project: Project) -> tuple[Path, Path]:
    """(the script, its marker): whatever runs it leaves its environment behind."""
    marker = project.dir / "ran-from-git-config"
    script = project.dir / "evil.sh"
    script.write_text(f"#!/bin/sh\nenv > '{marker}'\ncat \"$@\" 2>/dev/null\nexit 0\n")
    script.chmod(0o755)
    return script, marker


def _workspace(project: Project) -> Path:
    """A repository with a commit, an edited tracked file and an untracked one."""
    workspace = project.dir / "tasks" / "g"
    workspace.mkdir(parents=True)
    _git(workspace, "init", "-q")
    (workspace / "plan.txt").write_text("one\n")
    _git(workspace, "add", "plan.txt")
    _git(workspace, "commit", "-qm", "one")
    (workspace / "plan.txt").write_text("one\ntwo\n")
    (workspace / "new.txt").write_text("new\n")
    return workspace


def _control(workspace: Path, args: tuple[str, ...], env: dict[str, str], tty: bool) -> None:
    argv = [*GIT_AS_T, "-C", str(workspace), *args]
    if not tty:
        subprocess.run(  # it may fail: only whether the plant ran matters
            argv, check=False, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=60
        )
        return
    leader, follower = pty.openpty()
    try:
        subprocess.run(argv, check=False, env=env, stdout=follower, stderr=follower, timeout=60)
    finally:
        os.close(follower)
        os.close(leader)


# What git runs depends on the repository, not on the database: SQLite only.
@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize("plant", PLANTS, ids=[p.name for p in PLANTS])
def test_no_planted_git_command_runs_in_the_tick_or_at_the_gate(
    project: Project, plant: Plant
) -> None:
    project.write_config(
        """
        [[pipelines.default.stages]]
        name = "research"
        gate = true
        halt_after_no_change = 3
        worker = ["true"]
        verifier = ["sh", "-c", "echo '{\\"pass\\": true, \\"score\\": 0.9}'"]
        """
    )
    workspace = _workspace(project)
    script, marker = _script(project)
    plant.plant(workspace, script)

    assert project.cli("add", "g", "--title", "planted").exit_code == 0
    ticked = project.run("tick")
    assert ticked.returncode == 0, ticked.stderr
    assert project.state("g") == "research:awaiting_approval"
    [(start, changed)] = project.query("SELECT start_commit, workspace_changed FROM attempts")
    assert start not in (None, "pending")  # the start was looked at, through git
    assert changed is not None and not changed  # fingerprinted twice, compared
    shown = project.run("show", "g")
    assert shown.returncode == 0, shown.stderr
    assert "approval" in shown.stdout
    report = project.dir / "report.html"
    assert project.run("report", "--html", str(report)).returncode == 0
    assert "+two" in report.read_text("utf-8")  # the gate did read the diff
    assert not marker.exists(), marker.read_text()

    if plant.control is None:
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "ORCHESTRATOR_"))}
    env.update(ORCHESTRATOR_DB_URL=project.db_url, PAGER="", EDITOR="")
    _control(workspace, plant.control, env, plant.tty)
    assert marker.exists(), f"the plant of {plant.name} did not run under plain git"
    assert "ORCHESTRATOR_DB_URL" in marker.read_text()  # what a run would have leaked


def test_git_sees_no_orchestrator_setting_nor_a_denied_secret(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A command git still started (here: an fsmonitor, with the overrides
    # left out on purpose) would see the runner's environment, not ours.
    workspace = _workspace(project)
    script, marker = _script(project)
    _git(workspace, "config", "core.fsmonitor", str(script))
    monkeypatch.setenv("ORCHESTRATOR_DB_URL", "postgresql://user:secret@db/x")
    monkeypatch.setenv("API_TOKEN", "secret")
    subprocess.run(
        ["git", "-C", str(workspace), "status"],
        env=git_environment(),
        capture_output=True,
        check=True,
    )
    seen = marker.read_text()
    assert "HOME=" in seen  # it ran, and dumped its environment
    assert "ORCHESTRATOR_" not in seen
    assert "secret" not in seen


def test_a_hung_include_is_stopped_at_the_deadline(project: Project) -> None:
    # An include naming a FIFO blocks every git command reading the config.
    workspace = _workspace(project)
    fifo = workspace / ".git" / "hang"
    os.mkfifo(fifo)
    _git(workspace, "config", "include.path", str(fifo))
    git = SafeGit(workspace, timeout=2.0)
    assert not git.usable
    assert git.run("status").status is None


def test_each_step_keeps_its_own_bound_within_the_shared_one(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Several steps share one scan; a hung one is stopped at its own bound,
    # not at the end of the whole operation's. Which bound stopped it is read
    # from the deadline each git process was given, not from a stopwatch.
    from orchestrator.workspace import gitrun

    given: list[float] = []

    def bounded(argv: list[str], env: dict[str, str], limit: int, deadline: float) -> object:
        given.append(deadline)
        return gitprocess.run_bounded(argv, env, limit, deadline)

    workspace = _workspace(project)
    git = SafeGit(workspace, timeout=600.0, step_timeout=1.0)
    assert git.usable
    fifo = workspace / ".git" / "hang"
    os.mkfifo(fifo)
    _git(workspace, "config", "include.path", str(fifo))
    monkeypatch.setattr(gitrun, "run_bounded", bounded)
    hung = git.run("status")
    assert hung.status is None and hung.error == "out of time"
    # its step's bound: the operation's deadline would have been passed as it is
    assert given and given[-1] < git.deadline
    os.unlink(fifo)
    assert git.run("status").ok  # the next step has a step's time of its own


def test_output_past_the_limit_is_cut_and_flagged(project: Project) -> None:
    workspace = _workspace(project)
    (workspace / "plan.txt").write_text("x\n" * 50_000)
    done = SafeGit(workspace).run("diff", limit=1000)
    assert done.truncated and not done.ok
    assert len(done.stdout) == 1000


def test_an_order_file_naming_dev_zero_is_not_read(project: Project) -> None:
    # diff.orderFile is read whole before the diff: /dev/zero grows git
    # without end (gigabytes a second) until the deadline.
    workspace = _workspace(project)
    _git(workspace, "config", "diff.orderFile", "/dev/zero")
    done = SafeGit(workspace, timeout=5.0).run("diff")
    assert done.ok, done.error
    assert b"+two" in done.stdout


def test_git_reading_dev_zero_is_stopped_by_its_memory_cap(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Git reads .git/info/attributes through a link: pointed at /dev/zero,
    # it is one endless line. No option stops git reading it; a cap on
    # git's memory ends the call long before the deadline would.
    monkeypatch.setattr(gitprocess, "DATA_LIMIT", 64 << 20)
    workspace = _workspace(project)
    (workspace / ".git" / "info").mkdir(exist_ok=True)
    (workspace / ".git" / "info" / "attributes").symlink_to("/dev/zero")
    done = SafeGit(workspace, timeout=5.0).run("diff")
    assert done.status not in (0, None), done.error  # git itself gave up
    assert done.error != "out of time"


def test_git_runs_under_a_host_data_limit_already_below_the_cap(project: Project) -> None:
    # A host (a container, a cron with `ulimit -d`) whose hard limit is
    # below DATA_LIMIT: the cap cannot be raised to, and needs no setting.
    workspace = _workspace(project)
    below = (gitprocess.DATA_LIMIT * 3) // 4
    code = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_DATA, ({below}, {below}))\n"
        "from pathlib import Path\n"
        "from orchestrator.workspace.gitrun import SafeGit\n"
        "done = SafeGit(Path(sys.argv[1])).run('diff')\n"
        "print(done.ok, done.error)\n"
        "sys.exit(0 if done.ok and b'+two' in done.stdout else 1)\n"
    )
    argv = [sys.executable, "-c", code, str(workspace)]
    ran = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stdout + ran.stderr
