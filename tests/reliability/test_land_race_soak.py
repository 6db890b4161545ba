"""The landing race soak: a person's halt or cancel at a random moment of a
landing (`land = "merge"`), then resume, then ticks to the end.

Each iteration is one task of a gated one-stage pipeline that lands on a
real repository: the stage runs, a person approves, and a real tick
advances and lands it while `halt` or `cancel` (chosen at random) runs at a
uniformly random moment in [0, T], T the measured time of such a tick. Half
the iterations put a commit on main first, so the landing rebases. A
halted task is resumed and ticked (and approved) to the end.

What must hold, whatever the interleaving: the change is on main at most
once (at most one commit of main touches the task's file, and at most one
move of main per task), never after a cancel that succeeded; a refused
command says "already landing" or "already landed"; every move of main is
recorded as `landed` (moves == landed tasks), and the invariants hold.

`ORCHESTRATOR_LANDRACE_ITERATIONS` (default 20, so the suite stays fast;
200 for a real soak) and `ORCHESTRATOR_SOAK_SEED` override the defaults;
the seed is in every failure message.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import forkserver
import pytest
from e2e.e2e_support import PASS, stage
from reliability_support import run
from support import Project, check_invariants, git, make_repo, write_config

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

ITERATIONS = int(os.environ.get("ORCHESTRATOR_LANDRACE_ITERATIONS", "20"))
OWN_FILE = 'echo "$ORCHESTRATOR_TASK" > "$ORCHESTRATOR_TASK.txt"'
Process = forkserver.Forked | subprocess.Popen[bytes]


def configure(project: Project, check_sleep: float) -> None:
    head = '[pipelines.default]\nrepository = "repo"\nland = "merge"\n'
    head += f"land_check = {json.dumps(['sh', '-c', f'sleep {check_sleep:.3f}'])}\n\n"
    stages = stage("implement", worker=["sh", "-c", OWN_FILE], verifier=PASS, gate=True)
    write_config(project.config, head + stages)


def cli(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return run(project, *args, timeout=120)


def start_tick(project: Project) -> Process:
    argv = ["tick", "-q"]
    if forkserver.enabled():
        return forkserver.server().spawn(argv, cwd=project.dir, env=project.process_env())
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *argv],
        cwd=project.dir,
        env=project.process_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def state(project: Project, slug: str) -> str:
    return project.state(slug)


def to_the_end(project: Project, slug: str, why: str) -> str:
    """Approve and tick until the task is complete or cancelled."""
    for _ in range(8):
        now = state(project, slug)
        if now == "complete" or now.endswith(":cancelled"):
            return now
        if now.endswith(":awaiting_approval"):
            done = cli(project, "approve", slug)
        else:
            done = cli(project, "tick", "-q")
        assert done.returncode == 0, f"{why}: {done.stderr}"
    return state(project, slug)


def main_moves(repo: Path) -> int:
    return git(repo, "reflog", "--format=%gs", "main").count("orchestrator: land")


def touching(repo: Path, slug: str) -> int:
    """How many commits of main touch the task's file."""
    return len(git(repo, "log", "--format=%H", "main", "--", f"{slug}.txt").split())


def prepared(project: Project, slug: str, why: str) -> None:
    """The task added, its stage run and approved: the next tick lands it."""
    assert cli(project, "add", slug, "--title", slug).returncode == 0, why
    done = cli(project, "tick", "-q")
    assert done.returncode == 0, f"{why}: {done.stderr}"
    assert state(project, slug) == "implement:awaiting_approval", why
    assert cli(project, "approve", slug).returncode == 0, why


def test_a_person_racing_the_landing_never_lands_it_twice_nor_after_a_cancel(
    project: Project,
) -> None:
    seed = int(os.environ.get("ORCHESTRATOR_SOAK_SEED", "0")) or random.randrange(1, 2**31)
    rng = random.Random(seed)
    repo = make_repo(project.dir)

    # T: a landing tick uncontested, as measured here (the median of three).
    samples = []
    for index in range(3):
        configure(project, 0.1)
        prepared(project, f"w{index}", f"seed {seed}")
        clock = time.monotonic()
        assert cli(project, "tick", "-q").returncode == 0
        samples.append(time.monotonic() - clock)
        assert state(project, f"w{index}") == "complete"
    window = sorted(samples)[1]

    seen: Counter[str] = Counter()
    for iteration in range(ITERATIONS):
        slug = f"t{iteration:03d}"
        why = f"seed {seed}, iteration {iteration}"
        configure(project, rng.uniform(0.0, 0.2))
        prepared(project, slug, why)
        if rng.random() < 0.5:  # main moved meanwhile: the landing rebases
            (repo / f"other-{slug}.txt").write_text("other\n")
            git(repo, "add", f"other-{slug}.txt")
            git(repo, "commit", "-qm", f"meanwhile {slug}")
        command = rng.choice(("halt", "cancel"))
        at = rng.uniform(0.0, window)
        ticking = start_tick(project)
        with contextlib.suppress(subprocess.TimeoutExpired):
            ticking.wait(timeout=at)
        said = cli(project, command, slug)
        assert ticking.wait(timeout=120) == 0, why
        if said.returncode == 0:
            outcome = command
        else:
            assert said.returncode == 1, f"{why}: {said.stderr}"
            assert "already land" in said.stderr, f"{why}: {said.stderr}"
            outcome = "refused"
        seen[f"{command} {outcome if outcome == 'refused' else 'accepted'}"] += 1
        if outcome == "cancel":
            assert touching(repo, slug) == 0, f"{why}: landed after its cancel"
            assert to_the_end(project, slug, why) == "implement:cancelled", why
            assert touching(repo, slug) == 0, f"{why}: landed after its cancel"
        else:
            if outcome == "halt":
                assert state(project, slug) == "implement:halted", why
                assert cli(project, "resume", slug).returncode == 0, why
            assert to_the_end(project, slug, why) == "complete", why
            assert touching(repo, slug) == 1, f"{why}: on main {touching(repo, slug)} times"
            assert git(repo, "show", f"main:{slug}.txt") == f"{slug}\n", why
        landed = project.query(
            "SELECT count(*) FROM tasks WHERE status = 'complete' AND landed_commit IS NOT NULL"
        )[0][0]
        assert main_moves(repo) == landed, f"{why}: {main_moves(repo)} moves, {landed} landed"
        problems = check_invariants(project.db_url, allow_running=False)
        assert problems == [], f"{why}: {problems}"
    print(
        f"\nland race soak: seed {seed}, {ITERATIONS} iterations, window {window:.2f}s: "
        + ", ".join(f"{key} {count}" for key, count in sorted(seen.items()))
    )
    # Each landed task's `landed` event is there once.
    landed_events = project.query("SELECT count(*) FROM transitions WHERE event = 'landed'")[0][0]
    assert landed_events == main_moves(repo), f"seed {seed}"
