"""The sandbox as a feature: the engine asks its `wrap_command` hook for
every command, which wraps those whose config asks for walls; an engine
with no feature that wraps refuses such a command (fail closed) instead of
running it on the host; and a tick whose stages ask for nothing imports
none of the walls."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import Project
from tick.tick_support import make_bench

from orchestrator.config import PipelineConfig, Settings, load_settings
from orchestrator.errors import ConfigError
from orchestrator.ext.hooks import Feature, TickHooks
from orchestrator.ext.model import Command
from orchestrator.ext.registry import Registry
from orchestrator.features.sandbox import wrapping
from orchestrator.tick.ticker import Ticker

PASS = ["sh", "-c", 'echo \'{"pass": true, "score": 1.0}\'']
# What only the walls' own modules (and doctor's look) load.
WALLS = ("orchestrator.features.sandbox.walls", "orchestrator.features.sandbox.bwrap")


def _stage(name: str, worker: list[str], **keys: object) -> str:
    extra = "".join(f"{key} = {json.dumps(value)}\n" for key, value in keys.items())
    return (
        "[[pipelines.default.stages]]\n"
        f"name = {json.dumps(name)}\n"
        f"worker = {json.dumps(worker)}\n"
        f"verifier = {json.dumps(PASS)}\n" + extra
    )


def _settings(project: Project, stages: str, pipeline: str = "") -> Settings:
    project.write_config(f"[pipelines.default]\n{pipeline}\n" + stages)
    return load_settings(config=str(project.config), db_url=project.db_url, require_config=True)


def _command(
    settings: Settings, name: str, stage: str | None, tmp_path: Path, argv: tuple[str, ...]
) -> Command:
    pipeline = settings.pipeline("default")
    assert pipeline is not None
    found = pipeline.stage(stage) if stage is not None else None
    work = tmp_path / "work"  # beside the project's folder, not above it
    work.mkdir(exist_ok=True)
    return Command(
        name,
        argv,
        argv,
        work,
        {"PATH": "/usr/bin:/bin", "HOME": str(work)},
        work,
        pipeline,
        found,
        confined=found.confined if found is not None else pipeline.confined,
    )


# -- fail closed: no feature wraps, nothing runs -------------------------------------


@pytest.mark.parametrize("where", ["stage", "pipeline"])
def test_a_ticker_without_features_refuses_a_sandboxed_command(
    project: Project, tmp_path: Path, where: str
) -> None:
    """The engine alone (a `Ticker` built without features) knows no walls:
    a stage (or a pipeline, for its `setup`) that asks for them gets its
    command refused, as a program the walls hide is: not started, the
    attempt `host_error` (charged nothing), the tick stops (78) saying why,
    the tasks wait, ready, for a tick that has the sandbox."""
    ran = tmp_path / "ran"
    touch = ["sh", "-c", f"echo ran >> {ran}"]
    if where == "stage":
        config = f"[pipelines.default]\n\n{_stage('only', touch, sandbox='bwrap')}"
    else:
        config = (
            f'[pipelines.default]\nsandbox = "bwrap"\nsetup = {json.dumps(touch)}\n\n'
            + _stage("only", touch)
        )
    project.write_config(config)
    bench = make_bench(project)
    bench.add("t1", "t2")
    try:
        with pytest.raises(ConfigError) as raised:
            Ticker(bench.settings, bench.engine).tick()
    finally:
        bench.engine.dispose()
    name = "worker" if where == "stage" else "setup"
    assert str(raised.value) == (
        f"{name} of stage only: its config asks for a sandbox and no registered feature "
        "wraps commands; refusing to run it unwrapped"
    )
    assert raised.value.exit_code == 78
    assert not ran.exists()
    assert project.query("SELECT outcome FROM attempts") == [("host_error",)]
    assert project.state("t1") == "only" and project.state("t2") == "only"


def test_the_kernel_refuses_a_feature_command_no_feature_wraps(
    project: Project, tmp_path: Path
) -> None:
    """A feature's own command (the land check) goes through the same
    point: the engine alone refuses it when its config asks for walls, and
    hands back one that asks for none as it is."""
    settings = _settings(project, _stage("walled", ["true"], sandbox="bwrap"))
    registry = Registry.empty()
    walled = _command(settings, "land_check", "walled", tmp_path, ("make", "test"))
    assert walled.confined
    with pytest.raises(ConfigError, match=r"land_check of stage walled: .* refusing"):
        registry.wrap_command(walled)
    open_ = _command(_settings(project, _stage("open", ["true"])), "worker", "open", tmp_path, ())
    assert registry.wrap_command(open_) is open_.argv


def test_the_first_wrap_wins_and_none_passes_on(tmp_path: Path) -> None:
    """ "First non-None", in registration order: a feature not concerned
    returns None and the next is asked; once one wraps, no later one is."""
    asked: list[str] = []

    def feature(name: str, wraps: bool) -> Feature:
        def wrap_command(command: Command) -> tuple[str, ...] | None:
            asked.append(name)
            return (name, *command.argv) if wraps else None

        return Feature(name=name, tick=lambda kernel: TickHooks(wrap_command=wrap_command))

    features = (feature("quiet", False), feature("walls", True), feature("late", True))
    registry = Registry(features, kernel=None)  # type: ignore[arg-type]  # read by none
    pipeline = PipelineConfig(name="default", stages=(), setup=None)
    command = Command("worker", ("true",), ("true",), tmp_path, {}, tmp_path, pipeline, None, True)
    assert registry.wrap_command(command) == ("walls", "true")
    assert asked == ["quiet", "walls"]


# -- which walls a command gets ------------------------------------------------------


def test_the_sandbox_wraps_only_what_its_config_asks(project: Project, tmp_path: Path) -> None:
    """Worker and verifier: their stage's walls; setup: the pipeline's; the
    land check: the landing stage's, else the first sandboxed stage's;
    anything on the host: None, the command left as it is."""
    settings = _settings(
        project,
        _stage("open", ["true"])
        + _stage("walled", ["true"], sandbox="bwrap", sandbox_network=False),
        pipeline='sandbox = "none"\nsetup = ["true"]',
    )
    argv = ("true",)
    worker = wrapping.wrap(settings, _command(settings, "worker", "walled", tmp_path, argv))
    assert worker is not None and worker[0] == "bwrap" and worker[-2:] == ("--", "true")
    assert "--share-net" not in worker  # the stage's own keys
    assert wrapping.wrap(settings, _command(settings, "worker", "open", tmp_path, argv)) is None
    assert wrapping.wrap(settings, _command(settings, "setup", "walled", tmp_path, argv)) is None
    check = _command(settings, "land_check", "open", tmp_path, argv)
    assert check.stage is not None and not check.stage.confined
    wrapped = wrapping.wrap(settings, check)
    assert wrapped is not None and wrapped[0] == "bwrap" and "--share-net" not in wrapped


def test_a_program_the_walls_hide_is_refused_before_it_runs(
    project: Project, tmp_path: Path
) -> None:
    """An attempt's command whose program is on the host but not inside its
    walls (here, a virtualenv's under the host's `/tmp`, which the walls
    replace with their own) is refused with the reason and the `sandbox_ro`
    that would show it."""
    settings = _settings(project, _stage("walled", ["true"], sandbox="bwrap"))
    (tmp_path / "venv").mkdir()
    program = tmp_path / "venv" / "agent"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    command = _command(settings, "worker", "walled", tmp_path, (str(program),))
    with pytest.raises(ConfigError, match=r"worker of stage walled: .* is not visible inside"):
        wrapping.wrap(settings, command)


# -- a plain tick pays nothing for it ------------------------------------------------


def _modules_after_tick(project: Project) -> tuple[int, set[str]]:
    code = textwrap.dedent(
        """
        import atexit, json, sys
        atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))
        from orchestrator.cli import main
        main(["tick", "-q"])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=project.dir,
        env=project.process_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_a_plain_tick_imports_none_of_the_walls(project: Project) -> None:
    """A tick whose stages ask for no sandbox runs its attempt with the
    feature registered (its hook built) and loads none of the walls."""
    project.write_config(_stage("only", ["true"]))
    assert project.cli("add", "t1", "--title", "t").exit_code == 0
    status, modules = _modules_after_tick(project)
    assert status == 0
    assert project.query("SELECT outcome FROM attempts") == [("passed",)]
    assert "orchestrator.features.sandbox.wrapping" in modules  # the hook was built
    assert not [m for m in WALLS if m in modules]
    assert "orchestrator.doctor.sandbox" not in modules
