"""A verifier's noise, through real CLI processes: `calibrate` on a verifier
whose scores come from a known distribution, and `verifier_samples`
recording the median of several verdicts on the same work."""

from __future__ import annotations

import json
import random
import statistics
import sys
from pathlib import Path

import pytest
from e2e.e2e_support import stage
from support import Project, check_invariants

# Scores drawn from N(mean, SIGMA), clamped to [0, 1]; the mean is read from
# the workspace (so the verifier really runs there). Draw k is the k-th of
# one seeded sequence, k kept in a counter file outside the workspace.
# With SEED = 6 the 30 draws' sample stdev is 0.0997 (0.3% under SIGMA);
# over 30 samples the sample stdev's own spread is about SIGMA / sqrt(58),
# 13%, so an unseeded run would miss the 10% band almost half the time:
# the seed makes the check exact, and the test recomputes what the right
# answer is rather than trusting the 10% band alone.
SEED, SIGMA, SAMPLES = 6, 0.1, 30
NOISY = """
import json, random, sys
from pathlib import Path
counter = Path(sys.argv[1])
k = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(k + 1))
mean = float(Path("mean.txt").read_text())
draws = random.Random(int(sys.argv[2]))
score = [draws.gauss(mean, float(sys.argv[3])) for _ in range(k + 1)][-1]
print(json.dumps({"pass": False, "score": min(1.0, max(0.0, score))}))
"""


def expected(mean: float) -> list[float]:
    draws = random.Random(SEED)
    return [min(1.0, max(0.0, draws.gauss(mean, SIGMA))) for _ in range(SAMPLES)]


def test_calibrate_reports_the_spread_of_a_known_distribution(
    project: Project, tmp_path: Path
) -> None:
    script = tmp_path / "noisy.py"
    script.write_text(NOISY)
    counter = tmp_path / "counter"
    verifier = [sys.executable, str(script), str(counter), str(SEED), str(SIGMA)]
    project.write_config(stage("review", verifier=verifier))
    assert project.run("add", "essay", "--title", "An essay").returncode == 0
    workspace = project.dir / "tasks" / "essay"
    workspace.mkdir(parents=True)
    (workspace / "mean.txt").write_text("0.5\n")
    done = project.run(
        "calibrate", "essay", "--stage", "review", "--samples", str(SAMPLES), "--json"
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    truth = expected(0.5)
    assert result["samples"] == SAMPLES and result["invalid"] == 0
    assert result["scores"] == truth  # every sample ran, in order, in the workspace
    assert abs(result["stdev"] - SIGMA) <= 0.1 * SIGMA
    assert abs(result["stdev"] - statistics.stdev(truth)) < 1e-12
    assert abs(result["mean"] - 0.5) <= 0.1 * SIGMA
    assert result["min"] == min(truth) and result["max"] == max(truth)
    assert result["suggested_min_delta"] == round(2 * result["stdev"], 4)
    # Nothing was recorded: no attempt, the task still ready.
    assert project.query("SELECT count(*) FROM attempts") == [(0,)]
    assert project.state("essay") == "review"
    counter.write_text("0")
    text = project.run("calibrate", "essay", "--stage", "review", "--samples", "5")
    assert text.returncode == 0, text.stderr
    assert "5 samples" in text.stdout and "suggested plateau min_delta" in text.stdout


def test_calibrate_refuses_bad_input(project: Project, tmp_path: Path) -> None:
    silent = [sys.executable, "-c", "print('no verdict here')"]
    project.write_config(stage("review", verifier=silent) + stage("build", worker=["true"]))
    assert project.run("add", "essay", "--title", "An essay").returncode == 0
    nothing = project.run("calibrate", "essay", "--stage", "review", "--samples", "3")
    assert nothing.returncode == 1 and "no workspace" in nothing.stderr
    (project.dir / "tasks" / "essay").mkdir(parents=True)
    cases = [
        (["calibrate", "essay", "--stage", "review", "--samples", "3"], 65, "no verdict"),
        (["calibrate", "essay", "--stage", "build", "--samples", "3"], 1, "no verifier"),
        (["calibrate", "essay", "--stage", "revue", "--samples", "3"], 1, "did you mean"),
        (["calibrate", "nope", "--stage", "review", "--samples", "3"], 1, "no task"),
        (["calibrate", "../x", "--stage", "review", "--samples", "3"], 1, "slug"),
        (["calibrate", "essay", "--stage", "review", "--samples", "1"], 2, "samples"),
    ]
    for argv, status, words in cases:
        done = project.run(*argv)
        assert done.returncode == status, (argv, done.stderr)
        assert words in done.stderr, (argv, done.stderr)


# Sample k of the verifier (a counter in the workspace's parent): scores
# 0.2, 0.9, 0.6 with pass false, true, true.
SAMPLED = """
import json, sys
from pathlib import Path
counter = Path(sys.argv[1])
k = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(k + 1))
score, passed = [(0.2, False), (0.9, True), (0.6, True)][k % 3]
print(json.dumps({"pass": passed, "score": score, "reasons": [f"sample {k + 1}"]}))
"""


def test_verifier_samples_records_the_median_and_the_majority(
    project: Project, tmp_path: Path
) -> None:
    script = tmp_path / "sampled.py"
    script.write_text(SAMPLED)
    verifier = [sys.executable, str(script), str(tmp_path / "counter")]
    project.write_config(stage("review", verifier=verifier, verifier_samples=3))
    assert project.run("add", "essay", "--title", "An essay").returncode == 0
    done = project.run("tick")
    assert done.returncode == 0, done.stderr
    rows = project.query("SELECT outcome, pass, score, reasons FROM attempts")
    assert rows == [("passed", 1, 0.6, '["sample 3"]')]
    folder = project.dir / "state"
    outs = sorted(p.name for p in folder.rglob("verifier*.out"))
    assert outs == ["verifier-2.out", "verifier-3.out", "verifier.out"]
    assert project.state("essay") == "complete"
    assert check_invariants(project.db_url, allow_running=False) == []


def test_every_samples_reported_cost_is_recorded(project: Project, tmp_path: Path) -> None:
    paying = [
        sys.executable,
        "-c",
        "import json, os; open(os.environ['ORCHESTRATOR_USAGE_FILE'], 'w').write("
        "json.dumps({'cost_usd': 0.01})); print(json.dumps({'pass': True, 'score': 1.0}))",
    ]
    project.write_config(stage("review", verifier=paying, verifier_samples=3))
    assert project.run("add", "essay", "--title", "An essay").returncode == 0
    assert project.run("tick").returncode == 0
    [(cost,)] = project.query("SELECT cost_usd FROM attempts")
    assert cost == 0.03


def test_calibrate_runs_a_sandboxed_stages_verifier_in_its_sandbox(
    project: Project, tmp_path: Path
) -> None:
    """The verifier reads what the worker wrote: a stage that runs it under
    `sandbox = "bwrap"` must not have calibrate run it on the host. Here it
    tries to write beside the project (read-only in the sandbox)."""
    import shutil
    import subprocess

    if (
        shutil.which("bwrap") is None
        or subprocess.run(
            ["bwrap", "--ro-bind", "/", "/", "true"], capture_output=True, check=False
        ).returncode
    ):
        import os

        assert not os.environ.get("CI"), "bwrap is missing or cannot run"
        pytest.skip("bwrap cannot run here")
    escaped = project.dir / "escaped.txt"
    verifier = [
        "sh",
        "-c",
        f'echo out > {escaped} 2>/dev/null; echo \'{{"pass": false, "score": 0.5}}\'',
    ]
    project.write_config(stage("review", verifier=verifier, sandbox="bwrap"))
    assert project.run("add", "essay", "--title", "An essay").returncode == 0
    (project.dir / "tasks" / "essay").mkdir(parents=True)
    done = project.run("calibrate", "essay", "--stage", "review", "--samples", "2")
    assert done.returncode == 0, done.stderr
    assert not escaped.exists(), "calibrate ran the verifier outside its sandbox"
