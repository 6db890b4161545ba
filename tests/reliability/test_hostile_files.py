"""Hostile files in a workspace or an attempt's state folder.

A worker runs as the tick's user and knows both folders, so it can leave a
FIFO, a link to `/dev/zero` or to a file outside, or a thousand sparse
files where the orchestrator will read or write. Each case runs real
`python -m orchestrator` processes under a deadline: the command finishes,
the task goes on, nothing outside changes and nothing from outside shows.
Each case counts in the hostile-input lane of the reliability report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from e2e.e2e_support import stage
from reliability_report import HOSTILE, ProjectFactory, ReliabilityReport
from reliability_support import CRASH_RC, PASS_VERDICT, crash_env, query, run, violations

pytestmark = pytest.mark.reliability

DEADLINE = 300.0  # each command; a hang is a failure, not a stuck suite (never a speed bound)
# `python -c COUNTING_READS ARGS` runs `orchestrator ARGS` and at its exit
# prints its own /proc/self/io to stderr: what it read, in bytes.
COUNTING_READS = """
import atexit, runpy, sys
atexit.register(lambda: sys.stderr.write(open("/proc/self/io").read()))
sys.argv = ["orchestrator", *sys.argv[1:]]
runpy.run_module("orchestrator", run_name="__main__", alter_sys=True)
"""


def python(code: str) -> list[str]:
    """A one-off worker or verifier: the script in `code` under the tick's interpreter."""
    return [sys.executable, "-c", code]


STATE = "state = pathlib.Path(os.environ['ORCHESTRATOR_USAGE_FILE']).parent\n"
PASS_LINE = "print(json.dumps({'pass': True, 'score': 0.9}))\n"
HEADER = "import json, os, pathlib\n"


def plant(path: Path, kind: str, outside: Path | None = None) -> None:
    """Put a FIFO, a link to `/dev/zero` or a link to `outside` at `path`."""
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        assert outside is not None
        path.symlink_to(outside)


def finished(result: object, what: str) -> None:
    returncode = getattr(result, "returncode", None)
    stderr = str(getattr(result, "stderr", ""))
    assert "Traceback" not in stderr, (what, stderr)
    assert returncode == 0, (what, returncode, stderr)


# -- 3. the workspace fingerprint ---------------------------------------------------------


@pytest.mark.lane(HOSTILE)
def test_fingerprint_reads_no_fifo_and_no_device(
    new_project: ProjectFactory, report: ReliabilityReport
) -> None:
    """Untracked files in a git workspace are hashed by content: a FIFO
    among them hung the tick (holding the host lock), links to /dev/zero
    read 64 MiB each."""
    worker = python(
        "import os, subprocess\n"
        "subprocess.run(['git', 'init', '-q', '.'], check=True)\n"
        "os.mkfifo('pipe')\n"
        "for i in range(40): os.symlink('/dev/zero', f'zero{i}')\n"
        "open('notes.txt', 'w').write('work')\n"
    )
    project = new_project(
        stage("work", worker=worker, verifier=PASS_VERDICT, halt_after_no_change=2)
    )
    assert project.cli("add", "t1", "--title", "fifo").exit_code == 0
    result = run(project, "tick", timeout=DEADLINE)  # a FIFO read would hang it: a failure
    finished(result, "tick")
    assert query(project.db_url, "SELECT outcome FROM attempts") == [("passed",)]
    assert project.state("t1") == "complete"
    assert violations(project.db_url) == []


def test_a_fingerprint_reads_at_most_its_budget(tmp_path: Path) -> None:
    """One total for the whole fingerprint, not one per file."""
    from orchestrator import safefs
    from orchestrator.workspace import fingerprint as fp

    for i in range(6):
        with (tmp_path / f"big{i}").open("wb") as out:
            out.truncate(fp.MAX_BYTES // 4)
    budget = safefs.Budget(fp.MAX_BYTES)
    first = fp.fingerprint(tmp_path, budget)
    assert first is not None
    assert 0 < budget.spent <= fp.MAX_BYTES
    assert fp.fingerprint(tmp_path) == first  # the same tree, the same fingerprint


# -- 4. worker.out read back for usage ---------------------------------------------------


@pytest.mark.lane(HOSTILE)
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_swapped_worker_out_neither_hangs_the_tick_nor_recovery(
    kind: str, new_project: ProjectFactory, report: ReliabilityReport, tmp_path: Path
) -> None:
    """The verifier swaps worker.out after the tick wrote it; usage is read
    from it when the attempt is recorded, and again by the recovery of an
    attempt whose tick died."""
    envelope = json.dumps({"type": "result", "result": "done", "total_cost_usd": 0.25})
    worker = python(f"print({envelope!r})")
    target = "'/dev/zero'"
    swap = (
        "os.mkfifo(state / 'worker.out')"
        if kind == "fifo"
        else f"os.symlink({target}, state / 'worker.out')"
    )
    verifier = python(
        HEADER + STATE + "(state / 'worker.out').unlink()\n" + swap + "\n" + PASS_LINE
    )
    project = new_project(
        stage("work", worker=worker, verifier=verifier, output="claude-json")
        + stage("more", worker=worker, verifier=PASS_VERDICT, output="claude-json")
    )
    assert project.cli("add", "t1", "--title", "usage").exit_code == 0
    assert project.cli("add", "t2", "--title", "usage, then a crash").exit_code == 0

    ticked = run(project, "tick", "--task", "t1", timeout=DEADLINE)
    finished(ticked, "tick")
    assert project.state("t1") == "complete"

    died = run(project, "tick", "--task", "t2", env=crash_env("after_verifier"), timeout=DEADLINE)
    assert died.returncode == CRASH_RC, died.stderr
    plant(project.dir / "state" / "t2" / "work-001" / "worker.out", kind)
    recovered = run(project, "tick", "--task", "t2", timeout=DEADLINE)
    finished(recovered, "recovery")
    rows = query(
        project.db_url,
        "SELECT t.slug, a.stage, a.number, a.outcome FROM attempts a JOIN tasks t"
        " ON t.id = a.task_id ORDER BY a.id",
    )
    assert rows[:2] == [("t1", "work", 1, "passed"), ("t1", "more", 1, "passed")], rows
    assert ("t2", "work", 1, "crashed") in rows, rows
    assert violations(project.db_url) == []


# -- 5. process notes --------------------------------------------------------------------


@pytest.mark.lane(HOSTILE)
def test_process_note_as_fifo_hangs_neither_explain_nor_recovery(
    new_project: ProjectFactory, report: ReliabilityReport
) -> None:
    project = new_project(stage("work", worker=["true"], verifier=PASS_VERDICT))
    assert project.cli("add", "t1", "--title", "notes").exit_code == 0
    died = run(project, "tick", env=crash_env("after_verifier"), timeout=DEADLINE)
    assert died.returncode == CRASH_RC, died.stderr
    folder = project.dir / "state" / "t1" / "work-001"
    for name in ("worker.proc", "verifier.proc", "setup.proc"):
        plant(folder / name, "fifo")
    explained = run(project, "explain", "t1", timeout=DEADLINE)
    recovered = run(project, "tick", timeout=DEADLINE)
    finished(explained, "explain")
    finished(recovered, "recovery")
    assert query(project.db_url, "SELECT number, outcome FROM attempts ORDER BY id")[0] == (
        1,
        "crashed",
    )
    assert violations(project.db_url) == []


# -- 6. and 7. the gate ------------------------------------------------------------------


def approval_hash(stdout: str) -> str:
    for line in stdout.splitlines():
        if line.strip().startswith("approval"):
            return line.split()[1]
    raise AssertionError(f"no approval hash in {stdout!r}")


@pytest.mark.lane(HOSTILE)
def test_gate_shows_nothing_through_links_and_fifos(
    new_project: ProjectFactory, report: ReliabilityReport, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-OUTSIDE-THE-STATE-FOLDER\n")
    project = new_project(
        stage("review", worker=python("print('worker says hi')"), verifier=PASS_VERDICT, gate=True)
        + stage("after", worker=["true"], verifier=PASS_VERDICT)
    )
    assert project.cli("add", "t1", "--title", "gate").exit_code == 0
    finished(run(project, "tick", timeout=DEADLINE), "tick")
    assert project.state("t1") == "review:awaiting_approval"
    folder = project.dir / "state" / "t1" / "review-001"
    plant(folder / "worker.out", "link", secret)
    plant(folder / "worker.err", "fifo")
    plant(folder / "verifier.out", "dev-zero")
    page = tmp_path / "report.html"

    shown = run(project, "show", "t1", timeout=DEADLINE)
    reported = run(project, "report", "--html", str(page), "--task", "t1", timeout=DEADLINE)
    finished(shown, "show")
    finished(reported, "report --html")
    leaked = "TOP-SECRET" in shown.stdout or "TOP-SECRET" in page.read_text()
    expected = approval_hash(shown.stdout)
    approved = run(project, "approve", "t1", "--expect", expected, timeout=DEADLINE)
    report.escaped(int(leaked))
    assert not leaked
    finished(approved, "approve --expect")
    assert project.state("t1") != "review:awaiting_approval"


@pytest.mark.lane(HOSTILE)
def test_a_gate_look_reads_a_bounded_total(
    new_project: ProjectFactory, report: ReliabilityReport
) -> None:
    """1,000 sparse files of 16 MiB each (each just within the per-file
    cap) were read whole on every look: 16 GB. The look has one budget; a
    file past it is hashed by its metadata, so 1,000 cost about as much as
    4. Counted in bytes the `show` process read (/proc/self/io), against
    the 4-file look of the same test: no stopwatch."""
    project = new_project(
        stage("review", worker=["true"], verifier=PASS_VERDICT, gate=True)
        + stage("after", worker=["true"], verifier=PASS_VERDICT)
    )
    assert project.cli("add", "t1", "--title", "sparse").exit_code == 0
    finished(run(project, "tick", timeout=DEADLINE), "tick")
    workspace = project.dir / "tasks" / "t1"
    size = 16 << 20

    def sparse(count: int, start: int) -> None:
        for i in range(start, start + count):
            with (workspace / f"sparse{i:04d}.bin").open("wb") as out:
                out.truncate(size)

    def look() -> int:
        """Bytes `orchestrator show t1` read through read(2), all of it."""
        done = subprocess.run(
            [sys.executable, "-c", COUNTING_READS, "show", "t1"],
            cwd=project.dir,
            env=project.process_env(),
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return int(done.stderr.rsplit("rchar: ", 1)[1].split()[0])

    sparse(4, 0)
    baseline = look()
    sparse(996, 4)
    many = look()
    from orchestrator.workspace.listing import LOOK_BYTES

    # one budget for the look: 996 more files cost their metadata, not 16 GB
    assert many - baseline < LOOK_BYTES, (many, baseline)

    from orchestrator import safefs
    from orchestrator.workspace.changes import collect
    from orchestrator.workspace.listing import LOOK_BYTES, StageStart

    budget = safefs.Budget(LOOK_BYTES)
    changes = collect(workspace, StageStart(None), budget)
    assert budget.spent <= LOOK_BYTES
    assert len([p for p in changes.digest_parts if p.startswith("file:")]) == 1000


# -- 11. links planted where the tick writes ---------------------------------------------


@pytest.mark.lane(HOSTILE)
def test_a_planted_next_attempt_folder_is_not_written_through(
    new_project: ProjectFactory, report: ReliabilityReport, tmp_path: Path
) -> None:
    """Attempt 2's folder is planted (links to outside files for the kept
    result's reserve and the captures) before attempt 1 runs: attempt 2
    records an error that counts toward nothing, attempt 3 runs afresh."""
    outside = tmp_path / "outside"
    outside.mkdir()
    victims = {name: outside / name for name in ("result.json", "worker.out", "verifier.out")}
    for victim in victims.values():
        victim.write_text("precious\n")
    sequence = tmp_path / "scores"
    sequence.write_text('0.2\n{"pass": true, "score": 0.9}\n')
    from e2e.e2e_support import agent

    project = new_project(
        stage(
            "work",
            worker=python("print('working')"),
            verifier=agent("--sequence", str(sequence)),
            max_attempts=2,
        )
    )
    assert project.cli("add", "t1", "--title", "planted").exit_code == 0
    planted = project.dir / "state" / "t1" / "work-002"
    planted.mkdir(parents=True)
    for name, victim in victims.items():
        (planted / name).symlink_to(victim)

    for _ in range(5):
        finished(run(project, "tick", timeout=DEADLINE), "tick")
        if project.state("t1") == "complete":
            break
    untouched = all(v.read_text() == "precious\n" for v in victims.values())
    report.escaped(sum(v.read_text() != "precious\n" for v in victims.values()))
    assert untouched
    rows = query(project.db_url, "SELECT number, outcome, error FROM attempts ORDER BY id")
    assert [r[:2] for r in rows] == [(1, "failed"), (2, "host_error"), (3, "passed")], rows
    assert "already exists" in rows[1][2], rows
    assert project.state("t1") == "complete"
    assert violations(project.db_url) == []


@pytest.mark.lane(HOSTILE)
def test_capture_files_replace_links_the_worker_planted(
    new_project: ProjectFactory, report: ReliabilityReport, tmp_path: Path
) -> None:
    """The worker links its own capture files to files outside while it
    runs; the tick's capture replaces each link, never writes through it."""
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    worker = python(
        HEADER
        + STATE
        + "for name in ('worker.out', 'worker.err', 'verifier.out', 'prompt.md'):\n"
        + f"    os.symlink({str(outside)!r}, state / name)\n"
        + "print('worker output')\n"
    )
    project = new_project(stage("work", worker=worker, verifier=PASS_VERDICT))
    assert project.cli("add", "t1", "--title", "links").exit_code == 0
    finished(run(project, "tick", timeout=DEADLINE), "tick")
    untouched = outside.read_text() == "precious\n"
    report.escaped(int(not untouched))
    assert untouched
    folder = project.dir / "state" / "t1" / "work-001"
    assert not (folder / "worker.out").is_symlink()
    assert (folder / "worker.out").read_text().strip() == "worker output"
    assert project.state("t1") == "complete"


@pytest.mark.lane(HOSTILE)
def test_a_state_folder_the_worker_swaps_for_a_link_is_not_the_hosts_fault(
    new_project: ProjectFactory, report: ReliabilityReport, tmp_path: Path
) -> None:
    """The worker moves its attempt's folder away and leaves a link to a
    folder outside. The writes after it are refused, but that is the
    worker's doing, not a full or broken disk: the tick must not stop
    claiming (and exit 74) on its word, nor touch anything outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    worker = python(
        HEADER
        + STATE
        + "if os.environ['ORCHESTRATOR_TASK'] == 't1':\n"
        + "    state.rename(state.with_name('moved'))\n"
        + f"    state.symlink_to({str(outside)!r})\n"
        + "print('worker output')\n"
    )
    project = new_project(stage("work", worker=worker, verifier=PASS_VERDICT))
    assert project.cli("add", "t1", "--title", "swaps", "--priority", "9").exit_code == 0
    assert project.cli("add", "t2", "--title", "honest").exit_code == 0
    finished(run(project, "tick", timeout=DEADLINE), "tick")
    escaped = sorted(p.name for p in outside.iterdir())
    report.escaped(len(escaped))
    assert escaped == []
    assert project.state("t2") == "complete"
    assert violations(project.db_url) == []
