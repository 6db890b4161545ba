"""Best of N through real `tick --jobs 4` processes on a real repository:
four candidates in four worktrees at once, a verifier that reads each
candidate's worktree, the best passing score wins (a tie: the first to
finish), the others kept at their refs."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from e2e.e2e_support import stage, wait_for
from support import Project, check_invariants, git, make_project, make_repo, write_config

SCORES = {1: 0.3, 2: 0.9, 3: 0.6, 4: 0.9}
# Each candidate writes its score into its own worktree, says it started,
# and waits for the test's go before it ends: the finish order is the
# order the test hands out the go files, whatever the scheduler does.
WORKER = (
    'c="$ORCHESTRATOR_CANDIDATE"; '
    'case "$c" in 1) s=0.3;; 2) s=0.9;; 3) s=0.6;; 4) s=0.9;; *) s=0;; esac; '
    'echo "$s" > answer.txt; echo "candidate $c" > "who-$c.txt"; '
    ': > "{signals}/started-$c"; '
    'n=0; while [ ! -e "{signals}/go-$c" ] && [ $n -lt 15000 ]; do sleep 0.02; n=$((n+1)); done'
)
# Reads the worktree it runs in: the score is what the worker left there.
VERIFIER = (
    "import json, pathlib; s = float(pathlib.Path('answer.txt').read_text()); "
    "print(json.dumps({'pass': s >= 0.5, 'score': s, 'reasons': ['answer ' + str(s)], "
    "'next_hint': 'aim higher'}))"
)


def candidates_project(project: Project, signals: Path, candidates: int = 4) -> Path:
    repo = make_repo(project.dir)
    signals.mkdir()
    stages = stage(
        "implement",
        worker=["sh", "-c", WORKER.replace("{signals}", str(signals))],
        verifier=[sys.executable, "-c", VERIFIER],
        candidates=candidates,
        gate=True,
    )
    write_config(project.config, '[pipelines.default]\nrepository = "repo"\n\n' + stages)
    return repo


def closed(project: Project, slot: int) -> bool:
    rows = project.query(
        "SELECT finished_at FROM attempts WHERE candidate = :c AND round = 1", c=slot
    )
    return bool(rows) and rows[0][0] is not None


def test_four_candidates_run_at_once_and_the_first_best_passing_wins(
    project: Project, tmp_path: Path
) -> None:
    signals = tmp_path / "signals"
    repo = candidates_project(project, signals)
    assert project.run("add", "fix", "--title", "Fix it").returncode == 0
    base = git(repo, "rev-parse", "main").strip()
    tick = project.popen("tick", "--jobs", "4")
    try:
        # All four are running before any may end: `--jobs 4` ran them at once.
        wait_for(
            lambda: all((signals / f"started-{c}").exists() for c in SCORES),
            timeout=240,
            what="four candidates started",
        )
        for slot in (1, 4, 3, 2):  # 4 ends before 2: the tie goes to 4
            (signals / f"go-{slot}").touch()
            wait_for(lambda slot=slot: closed(project, slot), timeout=240, what=f"{slot} closed")
        out, err = tick.communicate(timeout=240)
    finally:
        if tick.poll() is None:
            tick.kill()
            tick.communicate()  # reaped: no process outlives its test
    assert tick.returncode == 0, err
    assert project.state("fix") == "implement:awaiting_approval"

    rows = project.query(
        "SELECT number, round, candidate, candidates, outcome, score, started_at, finished_at, "
        "commit_sha FROM attempts ORDER BY candidate"
    )
    assert [(r[1], r[2], r[3]) for r in rows] == [(1, c, 4) for c in (1, 2, 3, 4)]
    assert [r[4] for r in rows] == ["failed", "passed", "passed", "passed"]
    assert [r[5] for r in rows] == [SCORES[c] for c in (1, 2, 3, 4)]
    # Their recorded run times overlap: every one started before any ended.
    assert max(r[6] for r in rows) < min(r[7] for r in rows)

    winner = next(r for r in rows if r[2] == 4)
    tip = git(repo, "rev-parse", "task/fix").strip()
    assert winner[8] == tip  # only the winner's commit is the task's
    assert [r[8] for r in rows if r[2] != 4] == [None, None, None]
    ref = f"refs/orchestrator/fix/implement/{winner[0]}"
    assert git(repo, "rev-parse", ref).strip() == tip
    assert git(repo, "show", f"{tip}:answer.txt").strip() == "0.9"
    assert git(repo, "show", f"{tip}:who-4.txt").strip() == "candidate 4"
    assert git(repo, "rev-parse", f"{tip}^").strip() == base  # one stage commit on the base
    # The task's worktree holds the winner's work.
    assert (project.dir / "tasks" / "fix" / "who-4.txt").read_text() == "candidate 4\n"
    # Three losers kept for inspection, their work intact.
    for r in rows:
        if r[2] == 4:
            continue
        kept = f"refs/orchestrator/fix/implement/{r[0]}"
        assert git(repo, "show", f"{kept}:who-{r[2]}.txt").strip() == f"candidate {r[2]}"
    # No candidate worktree or branch is left.
    assert git(repo, "for-each-ref", "refs/heads/cand/").strip() == ""
    assert "/.candidates/" not in git(repo, "worktree", "list")
    assert not any((project.dir / "tasks" / ".candidates").glob("fix/*"))

    # The history: one claim, one decision naming the winner's attempt.
    # The history: one claim (the round's first candidate), one decision.
    history = json.loads(project.run("history", "fix", "--json").stdout)
    assert [h["event"] for h in history] == ["add", "claim", "await_approval"], history
    decided = project.query(
        "SELECT a.candidate FROM transitions t JOIN attempts a ON a.id = t.attempt_id "
        "WHERE t.event = 'await_approval'"
    )
    assert decided == [(4,)]
    shown = json.loads(project.run("show", "fix", "--json").stdout)
    assert [(a["round"], a["candidate"]) for a in shown["attempts"]] == [
        (1, c) for c in (1, 2, 3, 4)
    ]
    assert [a["number"] for a in shown["attempts"] if a.get("winner")] == [winner[0]]
    assert check_invariants(project.db_url, allow_running=False) == []
    assert "round 1 decided: attempt 4, candidate 4 of 4, won" in out, out
    text = project.run("show", "fix").stdout
    assert "4 (r1 4/4*)" in text and "2 (r1 2/4)" in text, text

    # The gate page: every candidate's score, reasons and diff against the
    # round's base, the winner first; the approval hash covers them.
    from orchestrator.config import load_settings
    from orchestrator.storage.db import make_engine
    from orchestrator.web.pages import Pages
    from orchestrator.web.render import Links

    engine = make_engine(project.db_url)
    try:
        html, status = Pages(engine, load_settings(config=project.config)).gate(
            Links(), "fix", csrf="token"
        )
    finally:
        engine.dispose()
    assert status == 200
    order = [int(n) for n in re.findall(r'id="candidate-(\d+)"', html)]
    by_slot = {r[2]: r[0] for r in rows}
    assert order == [by_slot[4], by_slot[2], by_slot[3], by_slot[1]], order
    first = html.index(f'id="candidate-{by_slot[4]}"')
    assert "chosen" in html[first : html.index(f'id="candidate-{by_slot[2]}"')]
    assert "answer 0.3" in html and "+candidate 1" in html and "+0.6" in html
    assert html.count('<pre class="diff">') >= 4

    # Finished and pruned: the kept refs go with the worktree.
    assert project.run("approve", "fix").returncode == 0
    assert project.run("tick").returncode == 0
    assert project.state("fix") == "complete"
    pruned = project.run("prune", "--finished", "--older-than", "0")
    assert pruned.returncode == 0, pruned.stderr
    assert git(repo, "for-each-ref", "refs/orchestrator/").strip() == ""
    assert git(repo, "rev-parse", "task/fix").strip() == tip  # the branch stays


BEHIND = """
[pipelines.plain]
[[pipelines.plain.stages]]
name = "work"
max_attempts = 3
worker = ["true"]
verifier = ["sh", "-c", "echo '{\\"pass\\": false, \\"score\\": 0.1}'"]

[pipelines.default]
repository = "repo"

[[pipelines.default.stages]]
name = "work"
candidates = 2
worker = ["sh", "-c", "echo $ORCHESTRATOR_CANDIDATE > c.txt; sleep 0.3"]
verifier = ["sh", "-c", "echo '{\\"pass\\": true, \\"score\\": 0.5}'"]
"""


def test_a_round_is_not_starved_by_another_tasks_higher_attempt_number(project: Project) -> None:
    """The open-slot query compares a round's attempt with its own task's
    newest, not any task's: a task halted after three attempts at a stage
    of the same name once hid every later round's second slot for good."""
    make_repo(project.dir)
    write_config(project.config, BEHIND)
    assert project.run("add", "p", "--title", "p", "--pipeline", "plain").returncode == 0
    assert project.run("tick", "--jobs", "1").returncode == 0
    assert project.state("p") == "work:halted"
    assert project.run("add", "r", "--title", "r").returncode == 0
    for _ in range(2):
        done = project.run("tick", "--jobs", "2")
        assert done.returncode == 0, done.stdout + done.stderr
    rows = project.query(
        "SELECT a.candidate FROM attempts a JOIN tasks t ON t.id = a.task_id WHERE t.slug = 'r'"
    )
    assert sorted(c for (c,) in rows) == [1, 2]
    assert project.state("r") == "complete"
    assert check_invariants(project.db_url, allow_running=False) == []


def test_a_slot_whose_row_another_transaction_holds_is_passed_over(
    tmp_path: Path, migrated_pg: str
) -> None:
    """PostgreSQL: a round's task row held by another session (a long
    transaction, another host's record) does not stall a tick's claims:
    the tick runs the ready task it can take and ends; the slot is taken
    once the row is free."""
    from sqlalchemy import create_engine, text

    make_repo(tmp_path)
    project = make_project(
        tmp_path, migrated_pg, BEHIND.replace("max_attempts = 3", "max_attempts = 1")
    )
    assert project.run("add", "r", "--title", "r").returncode == 0
    # One candidate of two, then the bound: the round's second slot is open.
    assert project.run("tick", "--jobs", "1", "--max-tasks", "1").returncode == 0
    assert project.state("r") == "work:running"
    assert project.run("add", "p", "--title", "p", "--pipeline", "plain").returncode == 0
    holder = create_engine(migrated_pg)
    try:
        with holder.connect() as conn:
            conn.execute(text("SELECT id FROM tasks WHERE slug = 'r' FOR UPDATE"))
            done = project.run("tick", "--jobs", "2", timeout=60)  # a wait would outlast this
            assert done.returncode == 0, done.stdout + done.stderr
            assert project.state("p") == "work:halted"  # ran (and failed) meanwhile
            assert project.state("r") == "work:running"
            conn.rollback()
    finally:
        holder.dispose()
    assert project.run("tick", "--jobs", "2").returncode == 0
    assert project.state("r") == "complete"
    assert check_invariants(migrated_pg, allow_running=False) == []
