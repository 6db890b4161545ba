"""`land = "merge"` through real `tick` processes on a real repository:
two tasks landing at once (two processes; on PostgreSQL two hosts), a
conflict sent back to implement, a failing check, kills at each step, and
the config's refusals."""

from __future__ import annotations

import json
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
from e2e.e2e_support import PASS, kill_quietly, stage, wait_for
from support import Project, check_invariants, git, make_repo, write_config

from orchestrator.runner import pid_alive

# Each task writes a file named after itself (different files), or the
# first line of keep.txt (the same lines).
OWN_FILE = 'echo "$ORCHESTRATOR_TASK" > "$ORCHESTRATOR_TASK.txt"'
SAME_LINES = 'echo "changed by $ORCHESTRATOR_TASK" > keep.txt'


def check_logging(log: Path) -> list[str]:
    """A land_check that notes the tip it checks, start and end, around a pause
    long enough that two landings not serialised would interleave."""
    note = 'echo "{} $(git rev-parse HEAD)" >> "' + str(log) + '"'
    script = f"{note.format('start')}; sleep 0.3; {note.format('end')}"
    return ["sh", "-c", script]


def land_config(
    project: Project,
    worker: str,
    *,
    check: list[str] | None = None,
    extra: str = "",
    **settings: object,
) -> str:
    lines = ["[pipelines.default]", 'repository = "repo"', 'land = "merge"']
    if check is not None:
        lines.append(f"land_check = {json.dumps(check)}")
    stages = stage("implement", worker=["sh", "-c", worker], verifier=PASS)
    stages += stage("review", worker=["true"], verifier=PASS)
    text = "\n".join(lines) + "\n" + extra + "\n" + stages
    write_config(project.config, text, **settings)
    return text


def tip(repo: Path, ref: str = "main") -> str:
    return git(repo, "rev-parse", ref).strip()


def landed(project: Project, slug: str) -> str:
    return str(project.query("SELECT landed_commit FROM tasks WHERE slug = :s", s=slug)[0][0])


def events_of(project: Project, slug: str) -> list[str]:
    rows = project.query(
        "SELECT t.event FROM transitions t JOIN tasks k ON k.id = t.task_id "
        "WHERE k.slug = :s ORDER BY t.seq",
        s=slug,
    )
    return [row[0] for row in rows]


def second_process(project: Project, name: str) -> Project:
    """The same project ticked by a second process: its own lock file (the
    tick's file lock would keep it out), the same workspaces and database."""
    other = Project(dir=project.dir, db_url=project.db_url, config=project.dir / f"{name}.toml")
    text = project.config.read_text().replace(
        'lock_file = "orchestrator.lock"', f'lock_file = "{name}.lock"'
    )
    other.config.write_text(text)
    return other


def assert_linear(repo: Path) -> None:
    for line in git(repo, "log", "--format=%P", "main").splitlines():
        assert len(line.split()) <= 1, "a merge commit on main"


def test_two_tasks_of_different_files_land_at_once_from_two_processes(
    project: Project, tmp_path: Path
) -> None:
    repo = make_repo(project.dir)
    log = tmp_path / "checked.log"
    land_config(project, OWN_FILE, check=check_logging(log))
    for slug in ("a", "b"):
        assert project.run("add", slug, "--title", f"Task {slug}").returncode == 0
    other = second_process(project, "second")
    ticks = [project.popen("tick", "--task", "a"), other.popen("tick", "--task", "b")]
    for proc in ticks:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert project.state("a") == "complete" and project.state("b") == "complete"
    assert git(repo, "show", "main:a.txt") == "a\n" and git(repo, "show", "main:b.txt") == "b\n"
    assert_linear(repo)
    assert tip(repo) in (landed(project, "a"), landed(project, "b"))
    # The check ran on each rebased tip, one landing at a time (the lock).
    lines = log.read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["start", "end", "start", "end"]
    checked = [line.split()[1] for line in lines]
    assert checked[0] == checked[1] and checked[2] == checked[3]
    assert {checked[0], checked[2]} == {landed(project, "a"), landed(project, "b")}
    history = git(repo, "log", "--format=%H", "main").split()
    assert landed(project, "a") in history and landed(project, "b") in history
    for slug in ("a", "b"):
        assert events_of(project, slug)[-2:] == ["stage_passed", "landed"]
    kinds = [row[0] for row in project.query("SELECT kind FROM events ORDER BY id")]
    assert kinds.count("landed") == 2 and kinds.count("complete") == 2
    assert project.query("SELECT count(*) FROM land_locks WHERE owner IS NOT NULL") == [(0,)]
    assert check_invariants(project.db_url, allow_running=False) == []


def test_two_tasks_of_the_same_lines_one_lands_the_other_goes_back(project: Project) -> None:
    repo = make_repo(project.dir)
    land_config(project, SAME_LINES)
    for slug in ("a", "b"):
        assert project.run("add", slug, "--title", f"Task {slug}").returncode == 0
    # Both run their stages first (off the same base), then land in turn.
    done = project.run("tick", "--jobs", "2")
    assert done.returncode == 0, done.stderr
    states = {slug: project.state(slug) for slug in ("a", "b")}
    assert sorted(states.values()) == ["complete", "implement"], states
    loser = next(slug for slug, state in states.items() if state == "implement")
    winner = "b" if loser == "a" else "a"
    assert git(repo, "show", "main:keep.txt") == f"changed by {winner}\n"
    hint = project.query("SELECT next_hint, hint_source FROM tasks WHERE slug = :s", s=loser)[0]
    assert "keep.txt" in hint[0] and hint[1] == "landing"
    # Its branch is as its stages left it: the review commit on the implement one.
    subjects = git(repo, "log", "--format=%s", f"task/{winner}..task/{loser}").splitlines()
    assert subjects[:2] == [f"{loser}: review (attempt 1)", f"{loser}: implement (attempt 1)"]
    assert git(repo, "merge-base", "main", f"task/{loser}").strip() != tip(repo)
    assert events_of(project, loser)[-1] == "send_back"
    shown = project.run("explain", loser)
    assert shown.returncode == 0 and "keep.txt" in shown.stdout
    history = project.run("history", loser)
    assert "send_back" in history.stdout and "review:landing" in history.stdout
    assert check_invariants(project.db_url, allow_running=False) == []


def test_a_failing_land_check_sends_the_task_back_with_its_output_tail(
    project: Project,
) -> None:
    repo = make_repo(project.dir)
    base = tip(repo)
    failing = [
        "sh",
        "-c",
        "echo 'collected 3 items'; echo 'FAILED tests/test_a.py::test_x' >&2; exit 1",
    ]
    land_config(project, OWN_FILE, check=failing)
    assert project.run("add", "a", "--title", "Task a").returncode == 0
    done = project.run("tick")
    assert done.returncode == 0, done.stderr
    assert project.state("a") == "implement"
    hint = project.query("SELECT next_hint FROM tasks WHERE slug = 'a'")[0][0]
    assert "FAILED tests/test_a.py::test_x" in hint and "exited 1" in hint
    assert tip(repo) == base  # nothing landed
    # The next attempt of implement is given the check's output.
    assert [row[0] for row in project.query("SELECT hint FROM attempts ORDER BY id")] == ["", ""]
    project.run("tick")
    given = project.query("SELECT stage, hint FROM attempts ORDER BY id")
    assert given[2][0] == "implement" and "FAILED tests/test_a.py::test_x" in given[2][1]
    assert check_invariants(project.db_url, allow_running=False) == []


@pytest.mark.parametrize("point", ["land_after_rebase", "land_after_ref_move", "after_land_record"])
def test_a_kill_in_the_landing_is_finished_once_by_the_next_tick(
    project: Project, tmp_path: Path, point: str
) -> None:
    repo = make_repo(project.dir)
    log = tmp_path / "checked.log"
    land_config(project, OWN_FILE, check=["sh", "-c", f'git rev-parse HEAD >> "{log}"'])
    # Something landed on main meanwhile: the landing has a rebase to do.
    (repo / "other.txt").write_text("other\n")
    assert project.run("add", "a", "--title", "Task a").returncode == 0
    git(repo, "add", "other.txt")
    git(repo, "commit", "-qm", "meanwhile")
    killed = project.run("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": point})
    assert killed.returncode == 137, killed.stderr
    assert check_invariants(project.db_url) == []
    again = project.run("tick")
    assert again.returncode == 0, again.stderr
    assert project.state("a") == "complete"
    assert tip(repo) == landed(project, "a") == tip(repo, "task/a")
    assert git(repo, "reflog", "--format=%gs", "main").count("orchestrator: land") == 1
    assert events_of(project, "a").count("landed") == 1
    kinds = [row[0] for row in project.query("SELECT kind FROM events ORDER BY id")]
    assert kinds.count("landed") == 1
    assert_linear(repo)
    assert check_invariants(project.db_url, allow_running=False) == []


def test_land_without_a_repository_is_a_config_error(project: Project) -> None:
    write_config(
        project.config,
        '[pipelines.default]\nland = "merge"\n\n'
        + stage("implement", worker=["true"], verifier=PASS),
    )
    done = project.run("list")
    assert done.returncode == 78
    assert "land" in done.stderr and "repository" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        ('land = "squash"', "'merge' or 'pr' or 'none'"),
        ('land = "merge"\nland_to = "deploy"', "no stage 'deploy'"),
        ('land = "merge"\nland_check = "make test"', "land_check"),
        ('land = "merge"\nland_timeout = 0', "land_timeout"),
    ],
)
def test_bad_landing_keys_are_config_errors(project: Project, keys: str, says: str) -> None:
    make_repo(project.dir)
    write_config(
        project.config,
        f'[pipelines.default]\nrepository = "repo"\n{keys}\n\n'
        + stage("implement", worker=["true"], verifier=PASS),
    )
    done = project.run("list")
    assert done.returncode == 78, done.stderr
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_two_hosts_land_into_one_repository_at_once(tmp_path: Path, migrated_pg: str) -> None:
    """PostgreSQL, two "hosts" (own folders, own ORCHESTRATOR_HOST, one
    database and one repository): each lands its task, one at a time."""
    from support import make_project

    repo = make_repo(tmp_path)
    log = tmp_path / "checked.log"
    hosts = []
    for name in ("host-a", "host-b"):
        host = make_project(tmp_path / name, migrated_pg, "")
        land_config(host, OWN_FILE, check=check_logging(log))
        text = host.config.read_text().replace('repository = "repo"', f'repository = "{repo}"')
        host.config.write_text(text)
        host.env["ORCHESTRATOR_HOST"] = name
        hosts.append(host)
    a, b = hosts
    assert a.run("add", "a", "--title", "Task a").returncode == 0
    assert a.run("add", "b", "--title", "Task b").returncode == 0
    ticks = [a.popen("tick", "--task", "a"), b.popen("tick", "--task", "b")]
    for proc in ticks:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert a.state("a") == "complete" and a.state("b") == "complete"
    assert a.query("SELECT slug, host FROM tasks ORDER BY slug") == [
        ("a", "host-a"),
        ("b", "host-b"),
    ]
    assert_linear(repo)
    lines = log.read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["start", "end", "start", "end"]
    checked = {line.split()[1] for line in lines}
    assert checked == {landed(a, "a"), landed(a, "b")}
    assert check_invariants(migrated_pg, allow_running=False) == []


def test_a_refused_landing_halts_and_explain_names_why(project: Project) -> None:
    repo = make_repo(project.dir)
    land_config(project, OWN_FILE)
    assert project.run("add", "a", "--title", "Task a").returncode == 0
    # Hold the landing: the base checked out with a person's edit refuses it.
    (repo / "keep.txt").write_text("a person's edit\n")
    assert project.run("tick").returncode == 0
    assert project.state("a") == "review:halted"
    why = project.query("SELECT halt_reason FROM tasks WHERE slug = 'a'")[0][0]
    assert why == "land_refused"
    explained = project.run("explain", "a")
    assert "land_refused" in explained.stdout and "local changes" in explained.stdout
    subprocess.run(["git", "-C", str(repo), "checkout", "--", "keep.txt"], check=True)
    attempts = project.query("SELECT count(*) FROM attempts")[0][0]
    resumed = project.run("resume", "a")
    assert resumed.returncode == 0 and "review:halted -> review:landing" in resumed.stdout
    # The landing is retried, not the last stage: no agent runs again.
    assert project.run("tick").returncode == 0
    assert project.state("a") == "complete"
    assert project.query("SELECT count(*) FROM attempts")[0][0] == attempts
    shown = project.run("show", "a")
    assert landed(project, "a")[:12] in shown.stdout


def test_a_kill_after_the_ref_move_leaves_the_base_checkout_following_it(
    project: Project,
) -> None:
    """main is checked out (clean) in the repository. A tick killed after
    main moved but before that checkout followed: the next tick records
    the landing, and the checkout must follow too, or its index stays at
    the old tip and a commit there undoes the landing."""
    repo = make_repo(project.dir)
    land_config(project, OWN_FILE)
    assert project.run("add", "a", "--title", "Task a").returncode == 0
    killed = project.run("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": "land_after_ref_move"})
    assert killed.returncode == 137, killed.stderr
    again = project.run("tick")
    assert again.returncode == 0, again.stderr
    assert project.state("a") == "complete"
    assert tip(repo) == landed(project, "a")
    assert git(repo, "status", "--porcelain").strip() == ""
    assert (repo / "a.txt").read_text() == "a\n"
    assert check_invariants(project.db_url, allow_running=False) == []


def test_a_filter_only_the_main_trees_branch_includes_runs_nothing_in_a_landing(
    project: Project, tmp_path: Path
) -> None:
    # `includeIf "onbranch:main"` names the filter for the main working tree
    # alone (the task's worktree is on task/a): the landing's checkout there
    # must neutralise it all the same.
    repo = make_repo(project.dir)
    marker = tmp_path / "ran"
    evil = repo / ".git" / "evil.config"
    evil.write_text(f'[filter "evil"]\n\tsmudge = "sh -c \\"id > {marker}; cat\\""\n')
    git(repo, "config", "includeIf.onbranch:main.path", str(evil))
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("*.txt filter=evil\n")
    land_config(project, 'echo "$ORCHESTRATOR_TASK" > "$ORCHESTRATOR_TASK.txt"')
    assert project.run("add", "a", "--title", "Task a").returncode == 0
    done = project.run("tick")
    assert done.returncode == 0, done.stderr
    assert project.state("a") == "complete"
    assert (repo / "a.txt").read_text() == "a\n"
    assert not marker.exists(), marker.read_text()
    (repo / "a.txt").unlink()  # the control: plain git on main runs it
    git(repo, "checkout", "--", "a.txt")
    assert marker.exists()


# The worker points its worktree's `commondir` at a clean copy of the
# config (" ../..": admin/" .."/.. to git, through a link it made) and names
# a smudge filter in the main repository's own config.
COMMONDIR_ATTACK = r"""
echo "$ORCHESTRATOR_TASK" > "$ORCHESTRATOR_TASK.txt"
ADMIN=$(sed -n 's/^gitdir: //p' .git)
COMMON=$(cd "$ADMIN/../.." && pwd -P)
FAKE="{fake}"
mkdir -p "$FAKE/sub"
for n in objects refs logs info hooks worktrees HEAD; do ln -s "$COMMON/$n" "$FAKE/$n"; done
cp "$COMMON/config" "$FAKE/config"
printf '[filter "evil"]\n\tsmudge = "sh -c \\"id > {marker}; cat\\""\n' >> "$COMMON/config"
mkdir -p "$COMMON/info"; echo '*.txt filter=evil' >> "$COMMON/info/attributes"
ln -s "$FAKE/sub" "$ADMIN/ .."
printf ' ../..\n' > "$ADMIN/commondir"
"""


def test_a_rewritten_commondir_does_not_let_a_main_tree_filter_run_in_a_landing(
    project: Project, tmp_path: Path
) -> None:
    make_repo(project.dir)
    marker = tmp_path / "ran"
    land_config(project, COMMONDIR_ATTACK.format(fake=tmp_path / "fake", marker=marker))
    assert project.run("add", "a", "--title", "Task a").returncode == 0
    project.run("tick")
    assert project.state("a") != "implement:running"
    assert not marker.exists(), f"the filter ran in the tick's place: {marker.read_text()}"


# The worker's branch carries the land check's script (the check runs the
# branch's code, as `make test` would): it names a smudge filter in the
# repository's config only once the landing's config scan is done.
LATE_FILTER = r"""
echo "$ORCHESTRATOR_TASK" > "$ORCHESTRATOR_TASK.txt"
cat > check.sh <<'SH'
ADMIN=$(sed -n 's/^gitdir: //p' .git)
COMMON=$(cd "$ADMIN/../.." && pwd -P)
printf '#!/bin/sh\ntr "\\0" " " < /proc/$PPID/cmdline >> {marker}; cat\n' > {marker}.sh
chmod +x {marker}.sh
printf '[filter "evil"]\n\tsmudge = {marker}.sh\n' >> "$COMMON/config"
mkdir -p "$COMMON/info"; echo '*.txt filter=evil' >> "$COMMON/info/attributes"
SH
"""


def test_a_filter_the_land_check_names_runs_nothing_in_the_landing(
    project: Project, tmp_path: Path
) -> None:
    repo = make_repo(project.dir)
    marker = tmp_path / "ran"
    land_config(project, LATE_FILTER.format(marker=marker), check=["sh", "check.sh"])
    assert project.run("add", "a", "--title", "Task a").returncode == 0
    done = project.run("tick")
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), f"the filter ran in the tick's place: {marker.read_text()}"
    (repo / "a.txt").unlink(missing_ok=True)  # the control: plain git on main runs it
    git(repo, "checkout", "--", "a.txt")
    assert marker.exists()


def test_a_land_check_that_times_out_sends_the_task_back(project: Project) -> None:
    # A land_check stopped at land_timeout is a failing check (its hint says
    # "timed out after 2s"), as `_check` means it: not a halted landing.
    repo = make_repo(project.dir)
    base = tip(repo)
    land_config(project, OWN_FILE, check=["sh", "-c", "sleep 30"], extra="land_timeout = 2")
    assert project.run("add", "a", "--title", "Task a").returncode == 0
    done = project.run("tick")
    assert done.returncode == 0, done.stderr
    assert project.state("a") == "implement"
    hint = project.query("SELECT next_hint FROM tasks WHERE slug = 'a'")[0][0]
    assert "timed out after 2s" in hint
    assert tip(repo) == base


def test_a_killed_ticks_land_check_is_ended_before_the_next_check_starts(
    project: Project, tmp_path: Path
) -> None:
    """kill -9 of the tick while its land_check runs: the check carries the
    landing's tag and note, and the next tick ends it before its own check
    starts in the same worktree (not `start start end end`)."""
    make_repo(project.dir)
    log, release = tmp_path / "checked.log", tmp_path / "release"
    marker = f"land-check-{uuid.uuid4().hex}"  # no other run's marker contains it
    script = (
        f'echo start >> "{log}"; while [ ! -e "{release}" ]; do sleep 0.05; done; '
        f'echo end >> "{log}"'
    )
    land_config(project, OWN_FILE, check=["sh", "-c", script, marker])
    assert project.run("add", "a", "--title", "Task a").returncode == 0
    first = project.popen("tick")
    try:
        wait_for(lambda: log.exists() and log.read_text() == "start\n", timeout=120, what="check")
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
        second = project.popen("tick")
        wait_for(lambda: log.read_text().count("start") == 2, timeout=120, what="second check")
        release.write_text("")
        _, err = second.communicate(timeout=120)
        assert second.returncode == 0, err
    finally:
        release.write_text("")
        kill_quietly([p.pid for p in (first,) if p.poll() is None])
    assert log.read_text().split() == ["start", "start", "end"]
    assert project.state("a") == "complete"
    assert not running(marker)


def test_a_killed_ticks_land_check_is_ended_before_a_worker_runs_beside_it(
    project: Project, tmp_path: Path
) -> None:
    """kill -9 of the tick while its land_check runs, then a person halts
    and resumes the task: the resumed stage's worker runs in the same
    worktree, and the dead landing's check is ended before it starts (not
    only before the next check)."""
    log, release, seen, marker = held_check_project(project, tmp_path)
    first = project.popen("tick")
    try:
        wait_for(lambda: log.exists() and log.read_text() == "start\n", timeout=120, what="check")
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
        assert seen.read_text() == "looked\n"  # the review ran once, before the landing
        seen.unlink()
        halted = project.run("halt", "a")
        assert halted.returncode == 0, halted.stderr
        resumed = project.run("resume", "a")
        assert resumed.returncode == 0, resumed.stderr
        release_later = project.popen("tick")
        wait_for(seen.exists, timeout=120, what="the resumed worker")
        release.write_text("")
        _, err = release_later.communicate(timeout=120)
        assert release_later.returncode == 0, err
    finally:
        release.write_text("")
        kill_quietly([p.pid for p in (first,) if p.poll() is None])
    assert seen.read_text().split()[0] == "looked", seen.read_text()
    assert not running(marker)


def test_a_check_whose_tick_died_before_noting_it_is_still_ended(
    project: Project, tmp_path: Path
) -> None:
    """The tick dies right after spawning the land check, before it could
    note the child (`after_spawn`): the check runs on with no note of its
    pid. Before the resumed stage's worker runs in the worktree, it is
    ended all the same (found by the landing's tag), because the landing
    says a check is starting before it starts one."""
    log, release, seen, marker = held_check_project(project, tmp_path)
    try:
        # Dies after the rebase, before the check: the task waits to land.
        first = project.run("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": "land_after_rebase"})
        assert first.returncode == 137, first.stderr
        seen.unlink()
        # The next tick's first spawn is the check; it dies before noting it.
        second = project.run("tick", extra_env={"ORCHESTRATOR_TEST_FAULT": "after_spawn"})
        assert second.returncode == 137, second.stderr
        wait_for(lambda: log.exists() and log.read_text() == "start\n", timeout=120, what="check")
        assert running(marker)
        assert project.run("halt", "a").returncode == 0
        assert project.run("resume", "a").returncode == 0
        third = project.popen("tick")
        wait_for(seen.exists, timeout=120, what="the resumed worker")
        release.write_text("")
        _, err = third.communicate(timeout=120)
        assert third.returncode == 0, err
    finally:
        release.write_text("")
    assert seen.read_text().split()[0] == "looked", seen.read_text()
    assert not running(marker)


def held_check_project(project: Project, tmp_path: Path) -> tuple[Path, Path, Path, str]:
    """A landing task whose land_check logs `start` and waits for `release`,
    and whose review worker notes in `seen` whether it saw that check alive
    (`alive`) before `looked`; the task added. Returns (log, release, seen,
    the check's marker)."""
    make_repo(project.dir)
    log, release, seen = tmp_path / "checked.log", tmp_path / "release", tmp_path / "seen"
    marker = f"land-check-{uuid.uuid4().hex}"  # no other run's marker contains it
    script = (
        f'echo start >> "{log}"; while [ ! -e "{release}" ]; do sleep 0.05; done; '
        f'echo end >> "{log}"'
    )
    # The worker looks for the check by its marker, built at run time so
    # that its own command line does not hold it.
    head, tail = marker[:5], marker[5:]
    look = (
        f'm="{head}"; m="${{m}}{tail}"; '
        "for p in /proc/[0-9]*; do "
        'case "$(tr "\\0" " " < "$p/cmdline" 2>/dev/null)" in '
        f'*"$m"*) echo alive >> "{seen}";; esac; done; '
        f'echo looked >> "{seen}"'
    )
    lines = ["[pipelines.default]", 'repository = "repo"', 'land = "merge"']
    lines.append(f"land_check = {json.dumps(['sh', '-c', script, marker])}")
    stages = stage("implement", worker=["sh", "-c", OWN_FILE], verifier=PASS)
    stages += stage("review", worker=["sh", "-c", look], verifier=PASS)
    write_config(project.config, "\n".join(lines) + "\n\n" + stages)
    assert project.run("add", "a", "--title", "Task a").returncode == 0
    return log, release, seen, marker


def running(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes() and pid_alive(
                    int(entry.name)
                ):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found
