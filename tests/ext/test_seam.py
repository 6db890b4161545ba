"""The extension seam holds: the engine knows no feature, the features
are islands, the engine's feature words only go down, and a feature
defined here, wholly outside the package, is reached by a real tick at
each of its hook points, in registration order.

Imports are read from the source with `ast`, lazy ones inside functions
included (`test_structure.imports_of`): a feature reached through a lazy
import is still reached."""

from __future__ import annotations

import io
import tokenize
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import cast

import pytest
from e2e.e2e_support import PASS, stage
from sqlalchemy import Connection
from support import Project, make_repo
from test_structure import PACKAGE, imports_of, module_name
from tick.tick_support import make_bench

from orchestrator import compose
from orchestrator.config import StageConfig
from orchestrator.ext.hooks import Feature, TickHooks
from orchestrator.ext.model import (
    AttemptRun,
    Claim,
    Command,
    CommandRan,
    Refusal,
    TickOptions,
    TickReport,
)
from orchestrator.ext.ports import Kernel
from orchestrator.ext.registry import Registry
from orchestrator.features import FEATURES
from orchestrator.storage import repo, tables
from orchestrator.tick.ticker import Ticker

FEATURES_PACKAGE = "orchestrator.features"
# The engine and what it stands on: none of it may import a feature.
ENGINE = ("tick", "storage", "config", "runner", "workspace", "domain", "ext")
# Edges the config schema removes (its readers will get each feature's
# keys from the composition root): may only shrink.
ENGINE_EDGES_ALLOWED = {
    ("orchestrator.config.model", "orchestrator.features.landing.config"),
    ("orchestrator.config.sections", "orchestrator.features.landing.config"),
    ("orchestrator.config.sections", "orchestrator.features.pools.config"),
    # The sandbox's keys (`SandboxConfig` is a field of a stage and a
    # pipeline, made lazily): the same two edges as landing's, until the
    # config schema takes each feature's keys from the composition root.
    ("orchestrator.config.model", "orchestrator.features.sandbox.config"),
    ("orchestrator.config.sections", "orchestrator.features.sandbox.config"),
    # The config's composition point: the features' own Sections
    # (`Feature.config`) join the list the loader reads.
    ("orchestrator.config.sections", "orchestrator.features"),
}
# Identifiers in tick/ that name a feature, per file, as features still
# live there (worktrees; commands.py's two are `live_spool`). A file may
# only go down; a file not listed has none. Lower a number once a move
# lowers it.
FEATURE_WORDS = ("pool", "candidate", "land", "worktree", "sandbox", "restore")
TICK_FEATURE_WORDS = {
    "applier.py": 6,
    "attempt.py": 4,
    "attempt_context.py": 5,
    "branches.py": 5,
    "claims.py": 4,
    "commands.py": 2,
    "live_output.py": 3,
    "scheduler.py": 6,
    "snapshots.py": 2,
    "workspaces.py": 4,
}


def _modules() -> set[str]:
    return {module_name(p) for p in PACKAGE.rglob("*.py")}


def _imports(folder: Path) -> dict[str, set[str]]:
    modules = _modules()
    return {module_name(p): imports_of(p, modules) for p in sorted(folder.rglob("*.py"))}


def _is_feature(module: str) -> bool:
    return module == FEATURES_PACKAGE or module.startswith(FEATURES_PACKAGE + ".")


def test_the_engine_imports_no_feature() -> None:
    found = {
        (module, target)
        for folder in ENGINE
        for module, targets in _imports(PACKAGE / folder).items()
        for target in targets
        if _is_feature(target)
    }
    assert found <= ENGINE_EDGES_ALLOWED, sorted(found - ENGINE_EDGES_ALLOWED)


def test_only_compose_imports_the_registration_list() -> None:
    modules = _modules()
    importers = {
        module_name(p) for p in PACKAGE.rglob("*.py") if FEATURES_PACKAGE in imports_of(p, modules)
    }
    # compose hands the list to the tick and the CLI; config.sections
    # reads each feature's keys from it for the loader.
    assert importers == {"orchestrator.compose", "orchestrator.config.sections"}


def test_features_are_islands() -> None:
    features = PACKAGE / "features"
    problems = []
    for folder in sorted(p for p in features.iterdir() if (p / "__init__.py").exists()):
        own = f"{FEATURES_PACKAGE}.{folder.name}"
        for module, targets in _imports(folder).items():
            for target in targets:
                other = _is_feature(target) and not (target == own or target.startswith(own + "."))
                if (
                    other
                    or target == "orchestrator.tick"
                    or target.startswith("orchestrator.tick.")
                ):
                    problems.append(f"{module} imports {target}")
    assert problems == []


def _feature_words(path: Path) -> int:
    source = io.BytesIO(path.read_bytes())
    return sum(
        1
        for token in tokenize.tokenize(source.readline)
        if token.type == tokenize.NAME and any(w in token.string.lower() for w in FEATURE_WORDS)
    )


def test_the_engine_names_features_less_and_less() -> None:
    grown = {
        path.name: (count, TICK_FEATURE_WORDS.get(path.name, 0))
        for path in sorted((PACKAGE / "tick").glob("*.py"))
        if (count := _feature_words(path)) > TICK_FEATURE_WORDS.get(path.name, 0)
    }
    assert grown == {}, "(found, allowed) per file: move the feature's code behind a hook"


def test_the_words_counted_are_identifiers_only(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('# a pool\nland_all = "worktree"\nx = pools.sandbox\n', encoding="utf-8")
    assert _feature_words(sample) == 3


# -- a feature defined here, wholly outside the package ----------------------------


# A task is a branch: its worktree is where `before_workspace` is reached.
STAGES = '[pipelines.default]\nrepository = "repo"\n\n' + stage(
    "only", worker=["true"], verifier=PASS
)


def _toy(name: str, seen: list[str]) -> Feature:
    def tick(kernel: Kernel) -> TickHooks:
        seen.append(f"{name}: built for {kernel.settings.state_root.name}")

        def before_claims(options: TickOptions) -> None:
            seen.append(f"{name}: before_claims {options.task}")

        def before_workspace(claim: Claim) -> None:
            seen.append(f"{name}: before_workspace {claim.task.slug} #{claim.number}")

        def after_claims(options: TickOptions) -> None:
            seen.append(f"{name}: after_claims {options.task}")

        return TickHooks(
            before_claims=before_claims,
            before_workspace=before_workspace,
            after_claims=after_claims,
        )

    return Feature(name=name, tick=tick)


def test_a_toy_feature_is_reached_by_a_real_tick(project: Project) -> None:
    make_repo(project.dir)
    project.write_config(STAGES)
    bench = make_bench(project)
    bench.add("t1")
    seen: list[str] = []
    try:
        ticker = Ticker(bench.settings, bench.engine, features=(_toy("toy", seen),))
        report = ticker.tick(TickOptions(task="t1"))
    finally:
        bench.engine.dispose()
    assert report.outcomes == {"passed": 1}
    assert seen == [
        f"toy: built for {bench.settings.state_root.name}",
        "toy: before_claims t1",
        "toy: before_workspace t1 #1",
        "toy: after_claims t1",
    ]


def test_hooks_run_in_registration_order(project: Project) -> None:
    make_repo(project.dir)
    project.write_config(STAGES)
    bench = make_bench(project)
    bench.add("t1")
    seen: list[str] = []
    try:
        features = (_toy("b", seen), Feature(name="quiet"), _toy("a", seen))
        Ticker(bench.settings, bench.engine, features=features).tick()
    finally:
        bench.engine.dispose()
    points = [line for line in seen if "built" not in line]
    assert [line.split(":")[0] for line in points] == ["b", "a"] * 3
    assert [line.split(": ")[1].split()[0] for line in points[::2]] == [
        "before_claims",
        "before_workspace",
        "after_claims",
    ]


def test_a_point_no_feature_sets_is_an_empty_tuple() -> None:
    """The hot path pays one empty loop for a point nobody uses: the
    registry keeps only the hooks set, built once."""

    def only_before(options: TickOptions) -> None:
        raise AssertionError("not called here")

    registry = Registry(
        (Feature(name="one", tick=lambda kernel: TickHooks(before_claims=only_before)),),
        kernel=None,  # type: ignore[arg-type]  # this feature's factory reads none of it
    )
    assert registry._before_workspace == ()
    assert registry._after_claims == ()
    assert registry._before_claims == (only_before,)


@pytest.mark.parametrize("name", [f.name for f in FEATURES])
def test_the_composition_root_registers_each_feature(name: str, project: Project) -> None:
    project.write_config(STAGES)
    bench = make_bench(project)
    try:
        ticker = compose.ticker(bench.settings, bench.engine)
    finally:
        bench.engine.dispose()
    assert name in ticker.registry.names
    assert ticker.registry.names == tuple(f.name for f in FEATURES)


def test_the_claim_and_record_points_are_reached_in_their_places(project: Project) -> None:
    """A refusal keeps the task unclaimed (and the dry run says so); once
    admitted, `after_run` sees the run before the record and `after_record`
    runs in the record's transaction, its write committed with it."""
    make_repo(project.dir)
    project.write_config(STAGES)
    bench = make_bench(project)
    bench.add("t1")
    seen: list[str] = []
    admit = False

    def toy(kernel: Kernel) -> TickHooks:
        def refuse_claim(conn: Connection, stage: StageConfig, now: datetime) -> Refusal | None:
            seen.append(f"refuse_claim {stage.name}")
            return None if admit else Refusal("toy says no", (("default", stage.name),), "nor more")

        def would_refuse(conn: Connection, stage: StageConfig, now: datetime) -> Refusal | None:
            return None if admit else Refusal("toy says no", (), "nor more")

        def after_run(claim: Claim, run: AttemptRun, folder: Path) -> None:
            seen.append(f"after_run {claim.task.slug} {run.outcome.value} {folder.is_dir()}")

        def after_record(conn: Connection, claim: Claim, run: AttemptRun, now: datetime) -> None:
            task = repo.get_task_by_id(conn, claim.task.id)  # as the record left it
            assert task is not None
            seen.append(f"after_record {claim.task.slug} {task.status.value}")
            kernel.tx.say_after_commit("toy: recorded")

        return TickHooks(
            refuse_claim=refuse_claim,
            would_refuse=would_refuse,
            after_run=after_run,
            after_record=after_record,
        )

    said: list[str] = []
    try:
        features = (Feature(name="toy", tick=toy),)
        dry = Ticker(bench.settings, bench.engine, say=said.append, features=features)
        dry.tick(TickOptions(dry_run=True))
        refused = Ticker(bench.settings, bench.engine, features=features).tick()
        admit = True
        passed = Ticker(bench.settings, bench.engine, say=said.append, features=features).tick()
    finally:
        bench.engine.dispose()
    assert "t1: would not run (toy says no; nor more)" in said
    assert refused.claimed == 0
    assert passed.outcomes == {"passed": 1}
    assert seen == [
        "refuse_claim only",
        "refuse_claim only",
        "after_run t1 passed True",
        "after_record t1 complete",
    ]
    assert "toy: recorded" in said


def test_after_claim_runs_in_the_claims_transaction(project: Project) -> None:
    """`after_claim` sees the attempt opened and the task running, and what
    it writes commits with the claim."""
    make_repo(project.dir)
    project.write_config(STAGES)
    bench = make_bench(project)
    bench.add("t1")
    seen: list[str] = []

    def toy(kernel: Kernel) -> TickHooks:
        def after_claim(conn: Connection, claim: Claim, now: datetime) -> None:
            task = repo.get_task_by_id(conn, claim.task.id)
            assert task is not None
            opened = repo.attempt_with_token(conn, claim.token)
            assert opened is not None and opened.id == claim.attempt_id
            seen.append(f"after_claim {claim.task.slug} {task.status.value} #{claim.number}")

        return TickHooks(after_claim=after_claim)

    try:
        features = (Feature(name="toy", tick=toy),)
        report = Ticker(bench.settings, bench.engine, features=features).tick()
    finally:
        bench.engine.dispose()
    assert report.outcomes == {"passed": 1}
    assert seen == ["after_claim t1 running #1"]


def test_added_runs_in_adds_transaction(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """`Feature.added` hears of every new task, by slug and pipeline, inside
    `add`'s transaction: a failing hook adds nothing."""
    from orchestrator import Project as Library
    from orchestrator.api.adding import TaskSpec

    make_repo(project.dir)
    project.write_config(STAGES)
    heard: list[dict[str, str]] = []

    def added(conn: Connection, settings: object, new: Mapping[str, str], now: datetime) -> None:
        heard.append(dict(new))
        if "boom" in new:
            raise RuntimeError("the hook failed")

    monkeypatch.setattr(compose, "FEATURES", (Feature(name="toy", added=added),))
    with Library.open(project.config, db=project.db_url) as lib:
        lib.add_many([TaskSpec("a", "a"), TaskSpec("b", "b")])
        with pytest.raises(RuntimeError):
            lib.add("boom", title="boom")
        assert [t.slug for t in lib.tasks()] == ["a", "b"]
    assert heard == [{"a": "default", "b": "default"}, {"boom": "default"}]


def test_pipeline_of_decides_what_a_claimed_task_runs(project: Project) -> None:
    """The first non-None `pipeline_of` is the pipeline the claim opens
    the attempt on, and the attempt runs its commands; None leaves the
    configured one."""
    import dataclasses

    make_repo(project.dir)
    project.write_config(STAGES)
    bench = make_bench(project)
    bench.add("t1")
    bench.add("t2")
    marker = project.dir / "other.txt"
    configured = bench.settings.pipelines["default"]
    only = configured.stages[0]
    verifier = ("sh", "-c", f'echo ran >> {marker}; exec "$@"', "-", *(only.verifier or ()))
    other = dataclasses.replace(configured, stages=(dataclasses.replace(only, verifier=verifier),))

    def answer(kernel: Kernel) -> TickHooks:
        def pipeline_of(conn: Connection, task: repo.TaskSnapshot, given: object) -> object:
            assert given is configured
            return other if task.slug == "t1" else None

        return TickHooks(pipeline_of=pipeline_of)  # type: ignore[arg-type]

    try:
        features = (Feature(name="quiet"), Feature(name="answer", tick=answer))
        report = Ticker(bench.settings, bench.engine, features=features).tick()
    finally:
        bench.engine.dispose()
    assert report.outcomes == {"passed": 2}
    assert marker.read_text().splitlines() == ["ran"]  # t1's attempt only


def test_leave_task_passes_over_a_task_without_halting_it(project: Project) -> None:
    """A task a feature leaves stays ready (not halted, though the config
    lost its stage) and the claim goes on to the next task."""
    make_repo(project.dir)
    project.write_config(STAGES)
    bench = make_bench(project)
    bench.add("t1")
    bench.add("t2")
    with bench.engine.begin() as conn:
        conn.execute(tables.tasks.update().where(tables.tasks.c.slug == "t1").values(stage="gone"))
    asked: list[str] = []

    def leave(kernel: Kernel) -> TickHooks:
        def leave_task(conn: Connection, task: repo.TaskSnapshot) -> str | None:
            asked.append(task.slug)
            return "not mine" if task.slug == "t1" else None

        return TickHooks(leave_task=leave_task)

    try:
        features = (Feature(name="quiet"), Feature(name="leave", tick=leave))
        report = Ticker(bench.settings, bench.engine, features=features).tick()
    finally:
        bench.engine.dispose()
    assert report.outcomes == {"passed": 1}
    assert project.query("SELECT slug, stage, status FROM tasks ORDER BY slug") == [
        ("t1", "gone", "ready"),
        ("t2", "complete", "complete"),
    ]
    assert asked.count("t1") >= 1


def test_the_wrap_point_is_asked_for_each_command_and_what_it_returns_runs(
    project: Project, tmp_path: Path
) -> None:
    """`wrap_command` is asked for setup, worker and verifier, on the
    claim's pipeline and stage, with the argv rendered; the engine starts
    what it returns (here the command behind a shell that logs its name)."""
    log = tmp_path / "wrapped.log"
    project.write_config(
        '[pipelines.default]\nsetup = ["true"]\n\n'
        + stage("only", worker=["echo", "{task}"], verifier=PASS)
    )
    bench = make_bench(project)
    bench.add("t1")
    asked: list[tuple[str, str, str, bool]] = []

    def toy(kernel: Kernel) -> TickHooks:
        def wrap_command(command: Command) -> tuple[str, ...] | None:
            assert command.stage is not None and command.pipeline is not None
            asked.append((command.name, command.argv[-1], command.stage.name, command.confined))
            note = f'echo "$0" >> {log}; exec "$@"'
            return ("sh", "-c", note, command.name, *command.argv)

        return TickHooks(wrap_command=wrap_command)

    try:
        report = Ticker(bench.settings, bench.engine, features=(Feature("toy", tick=toy),)).tick()
    finally:
        bench.engine.dispose()
    assert report.outcomes == {"passed": 1}
    assert [a[0] for a in asked] == ["setup", "worker", "verifier"]
    assert asked[1] == ("worker", "t1", "only", False)  # rendered: {task} filled
    assert log.read_text().split() == ["setup", "worker", "verifier"]


def test_a_landing_a_feature_holds_waits_held_and_is_not_landed_again(project: Project) -> None:
    """`hold_finished` is asked in the landing's record transaction, with the
    landed commit; its reason turns `complete` into `held`, which the next
    tick's landing leaves alone (the holder moves it on)."""
    make_repo(project.dir)
    project.write_config(
        '[pipelines.default]\nrepository = "repo"\nland = "merge"\n\n'
        + stage("only", worker=["sh", "-c", "echo x > x.txt"], verifier=PASS)
    )
    bench = make_bench(project)
    bench.add("t1")
    asked: list[tuple[str, str, bool]] = []

    def toy(kernel: Kernel) -> TickHooks:
        def hold_finished(
            conn: Connection, task: repo.TaskSnapshot, commit: str | None, url: str | None
        ) -> str | None:
            current = repo.get_task_by_id(conn, task.id)  # inside the record, still landing
            assert current is not None
            asked.append((task.slug, current.status.value, commit is not None and url is None))
            return "toy follows it"

        return TickHooks(hold_finished=hold_finished)

    said: list[str] = []
    try:
        features = (*FEATURES, Feature(name="toy", tick=toy))
        Ticker(bench.settings, bench.engine, say=said.append, features=features).tick()
        Ticker(bench.settings, bench.engine, features=features).tick()
    finally:
        bench.engine.dispose()
    assert asked == [("t1", "landing", True)]
    assert project.state("t1") == "only:held"
    assert project.query("SELECT landed_commit IS NOT NULL FROM tasks") == [(True,)]
    last = "SELECT from_state, to_state, event, reason FROM transitions ORDER BY id DESC LIMIT 1"
    assert project.query(last) == [("only:landing", "only:held", "hold", "toy follows it")]
    assert "t1: held (toy follows it)" in said


def test_attempt_feedback_reaches_the_placeholder_the_prompt_and_the_environment(
    project: Project,
) -> None:
    """What `attempt_feedback` returns is `{feedback}` in argv and prompt and
    `ORCHESTRATOR_FEEDBACK` names its file; an attempt it says nothing of
    gets both empty."""
    project.write_config(
        stage(
            "only",
            worker=[
                "sh",
                "-c",
                'echo "$1|$ORCHESTRATOR_FEEDBACK" >> ../seen.txt',
                "w",
                "{feedback}",
            ],
            verifier=PASS,
        )
    )
    bench = make_bench(project)
    bench.add("t1", "t2")

    def toy(kernel: Kernel) -> TickHooks:
        def attempt_feedback(claim: Claim, folder: Path) -> tuple[str, Path] | None:
            if claim.task.slug != "t1":
                return None
            path = folder / "feedback.json"
            path.write_text('[{"author": "alice"}]')
            return "alice: fix it", path

        return TickHooks(attempt_feedback=attempt_feedback)

    try:
        Ticker(bench.settings, bench.engine, features=(Feature("toy", tick=toy),)).tick()
    finally:
        bench.engine.dispose()
    seen = sorted((bench.settings.workspace_root / "seen.txt").read_text().splitlines())
    assert seen[0].startswith("alice: fix it|") and seen[0].endswith("feedback.json")
    assert seen[1] == "|"


def test_a_features_attempt_env_reaches_the_worker_and_not_over_the_engines(
    project: Project,
) -> None:
    make_repo(project.dir)
    seen = project.dir / "seen.txt"
    toy = "ORCHESTRATOR_" + "TOY"  # made up: not a variable to document
    worker = ["sh", "-c", f'echo "${toy} $ORCHESTRATOR_TASK" > {seen}']
    project.write_config(
        '[pipelines.default]\nrepository = "repo"\n\n' + stage("only", worker=worker, verifier=PASS)
    )
    bench = make_bench(project)
    bench.add("t1")

    def tick(kernel: Kernel) -> TickHooks:
        def attempt_env(claim: Claim) -> dict[str, str]:
            return {toy: f"toy-{claim.number}", "ORCHESTRATOR_TASK": "not-t1"}

        return TickHooks(attempt_env=attempt_env)

    try:
        features = (Feature("toy", tick=tick),)
        report = Ticker(bench.settings, bench.engine, features=features).tick(TickOptions())
    finally:
        bench.engine.dispose()
    assert report.outcomes == {"passed": 1}
    assert seen.read_text() == "toy-1 t1\n"


def test_an_attempt_env_name_outside_ours_is_refused() -> None:
    def tick(kernel: Kernel) -> TickHooks:
        return TickHooks(attempt_env=lambda claim: {"PATH": "/evil"})

    registry = Registry((Feature("toy", tick=tick),), cast(Kernel, None))
    with pytest.raises(ValueError, match="'PATH' is not an ORCHESTRATOR_ variable"):
        registry.attempt_env(cast(Claim, None))


def test_a_feature_may_open_a_gate_itself_inside_the_record(project: Project) -> None:
    """`gate = "auto"` is a gate like `true`; at its passing verdict
    `open_gate` runs inside the record's transaction (the task already
    waits), and its reason becomes an `approve` by `verifier`; None leaves
    the gate to a person."""
    make_repo(project.dir)
    project.write_config(
        '[pipelines.default]\nrepository = "repo"\n\n'
        + stage("only", worker=["true"], verifier=PASS, gate="auto")
    )
    bench = make_bench(project)
    bench.add("t1")
    bench.add("t2")
    asked: list[str] = []

    def toy(kernel: Kernel) -> TickHooks:
        def open_gate(conn: Connection, claim: Claim, now: datetime) -> str | None:
            task = repo.get_task_by_id(conn, claim.task.id)
            assert task is not None
            asked.append(f"{claim.task.slug} {task.status.value}")
            return "toy trusts it" if claim.task.slug == "t1" else None

        return TickHooks(open_gate=open_gate)

    try:
        features = (Feature(name="toy", tick=toy),)
        Ticker(bench.settings, bench.engine, features=features).tick()
        with bench.engine.connect() as conn:
            t1, t2 = (repo.get_task(conn, slug) for slug in ("t1", "t2"))
            assert t1 is not None and t2 is not None
            opened = [t for t in repo.transitions_of(conn, t1.id) if t["event"] == "approve"]
    finally:
        bench.engine.dispose()
    assert sorted(asked) == ["t1 awaiting_approval", "t2 awaiting_approval"]
    assert (t1.status.value, t2.status.value) == ("complete", "awaiting_approval")
    assert [(t["actor"], t["reason"]) for t in opened] == [("verifier", "toy trusts it")]


def test_the_gate_key_takes_true_false_or_auto(project: Project) -> None:
    """Anything else is a config error naming the three."""
    project.write_config(
        '[pipelines.default]\nrepository = "repo"\n\n'
        + stage("only", worker=["true"], verifier=PASS, gate="sometimes")
    )
    with pytest.raises(Exception, match='true, false or "auto"'):
        make_bench(project)


def test_the_tick_and_command_timing_points_frame_the_tick(project: Project) -> None:
    """`tick_started` comes before anything of the tick, `command_ended`
    after each command with its times and exit status, `tick_ended` last
    with the report and the status the tick's row was closed with."""
    project.write_config(
        '[pipelines.default]\nsetup = ["true"]\n\n' + stage("only", worker=["true"], verifier=PASS)
    )
    bench = make_bench(project)
    bench.add("t1")
    seen: list[str] = []

    def toy(kernel: Kernel) -> TickHooks:
        def tick_started(options: TickOptions) -> None:
            seen.append("tick_started")

        def command_ended(claim: Claim, command: Command, ran: CommandRan) -> None:
            assert 0 < ran.started_ns <= ran.ended_ns
            seen.append(f"command_ended {claim.task.slug} {command.name} {ran.exit_code}")

        def tick_ended(options: TickOptions, report: TickReport, status: int) -> None:
            seen.append(f"tick_ended {report.outcomes} {status}")

        return TickHooks(
            tick_started=tick_started, command_ended=command_ended, tick_ended=tick_ended
        )

    try:
        Ticker(bench.settings, bench.engine, features=(Feature("toy", tick=toy),)).tick()
        closed = project.query("SELECT exit_code FROM ticks")
    finally:
        bench.engine.dispose()
    assert closed == [(0,)]
    assert seen == [
        "tick_started",
        "command_ended t1 setup 0",
        "command_ended t1 worker 0",
        "command_ended t1 verifier 0",
        "tick_ended {'passed': 1} 0",
    ]


def test_stages_of_decides_what_a_gate_command_checks(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A feature's `stages_of` is what `approve` and `reject --to` check the
    task's stage against: a stage its answer lacks is refused, a stage only
    its answer has is a choice."""
    import sys
    import types

    project.write_config(stage("build", worker=["true"], verifier=PASS, gate=True))
    assert project.cli("add", "t1", "--title", "t1").exit_code == 0
    assert project.cli("tick").exit_code == 0
    module = types.ModuleType("toy_stages_of")
    answer: list[tuple[str, ...] | None] = [("other",)]
    module.stages = lambda conn, task: answer[0]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(
        compose, "FEATURES", (Feature("toy", stages_of=f"{module.__name__}:stages"),)
    )
    refused = project.cli("approve", "t1")
    assert refused.exit_code == 1
    assert "its pipeline version has no stage 'build'" in refused.output
    assert project.state("t1") == "build:awaiting_approval"
    answer[0] = ("plan", "build")
    sent = project.cli("reject", "t1", "--to", "plan", "--note", "again")
    assert sent.exit_code == 0, sent.output
    assert project.state("t1") == "plan"
