"""Later facts as labels: an approval whose change then landed, and one the
landing sent back (its `land_check` failed), through real ticks on a real
git repository, each counted on its own by `verifiers`."""

from __future__ import annotations

import json

from e2e.e2e_support import stage
from support import Project, make_repo, write_config

# The check fails for the task named "bad", passes for the others.
CHECK = ["sh", "-c", 'test "$ORCHESTRATOR_TASK" != bad']
WORKER = ["sh", "-c", 'echo "$ORCHESTRATOR_TASK" > "$ORCHESTRATOR_TASK.txt"']
VERDICT = ["sh", "-c", 'echo \'{"pass": true, "score": 0.8}\'']


def test_landed_and_sent_back_are_counted_apart(project: Project) -> None:
    make_repo(project.dir)
    head = [
        "[pipelines.default]",
        'repository = "repo"',
        'land = "merge"',
        'land_to = "implement"',
        f"land_check = {json.dumps(CHECK)}",
    ]
    stages = stage("implement", worker=WORKER, verifier=VERDICT)
    stages += stage("review", worker=["true"], verifier=VERDICT, gate=True)
    write_config(project.config, "\n".join(head) + "\n\n" + stages)
    for slug in ("good", "bad"):
        assert project.run("add", slug, "--title", slug).returncode == 0
    done = project.run("tick")
    assert done.returncode == 0, done.stderr
    assert {project.state(s) for s in ("good", "bad")} == {"review:awaiting_approval"}
    for slug in ("good", "bad"):
        assert project.run("approve", slug, "--by", "carol").returncode == 0
    done = project.run("tick")
    assert done.returncode == 0, done.stderr
    assert project.state("good") == "complete"
    sent_back = "SELECT count(*) FROM transitions WHERE event = 'send_back'"
    assert project.query(sent_back) == [(1,)]
    result = project.run("verifiers", "--json", "--stage", "review")
    assert result.returncode == 0, result.stderr
    [report] = json.loads(result.stdout)
    assert (report["decisions"], report["approved"]) == (2, 2)
    assert report["later"] == {
        "sent_back": {"decisions": 1, "passed": 1},
        "landed": {"decisions": 1, "passed": 1},
    }
