"""An attempt's commands: each wrapped by the features that wrap commands
(fail closed), run under its fence guard, its output captured in the state
folder and its process identity noted; the child's environment; and what a
failing host folder does to the attempt and the tick."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from orchestrator import runner, safefs
from orchestrator.agents import runtime as agent_runtime
from orchestrator.config import PipelineConfig, Settings, StageConfig
from orchestrator.errors import ConfigError, host_error
from orchestrator.ext.model import PROCESS_NOTE_AFTER, Claim, Command, CommandRan
from orchestrator.ext.registry import Registry
from orchestrator.testing import fault_point
from orchestrator.tick.attempt_context import AttemptContext
from orchestrator.tick.fence import FenceGuard
from orchestrator.tick.live_output import both, live_spool
from orchestrator.tick.notes import AttemptNotes
from orchestrator.tick.progress import Progress
from orchestrator.tick.started import mark_started
from orchestrator.tick.steps import HostFault, host_folder
from orchestrator.tick.tick_run import TickRun


class CommandRunner:
    """Running an attempt's commands. The environment's filtered base is built
    once per tick, pipeline and stage; only the ORCHESTRATOR_* values change.

    Touches no table: child processes (through the runner), their capture
    files and process notes in the attempt's state folder, the tick's
    `AttemptNotes`, and of the tick only its host fault (`TickRun.host_fault`)."""

    def __init__(
        self,
        settings: Settings,
        tick: TickRun,
        notes: AttemptNotes,
        progress: Progress,
        wrap: Callable[[Command], tuple[str, ...]] | None = None,
        ended: Callable[[Claim, Command, CommandRan], None] | None = None,
    ) -> None:
        self.settings = settings
        self.tick = tick
        self.notes = notes
        self.progress = progress  # live lines on a terminal
        # The features' `wrap_command` (`Registry`); with none, a command
        # whose config asks for walls is refused, never run unwrapped.
        self.wrap = wrap or Registry.empty().wrap_command
        # The features' `command_ended`: told when each command ran.
        self.ended = ended or Registry.empty().command_ended
        # Keyed by (pipeline, stage): two pipelines may both have `implement`
        # with different `env`, and a secret must reach only the one naming it.
        self._environments: dict[tuple[str, str], dict[str, str]] = {}
        # What a command's children leave behind comes to the tick, which
        # ends it with the command (`runner/reaper.py`).
        runner.adopt_orphans()

    def run(
        self,
        name: str,
        argv: tuple[str, ...],
        context: AttemptContext,
        cwd: Path,
        env: dict[str, str],
        state_dir: Path,
        guard: FenceGuard,
        stdin: bytes | None = None,
    ) -> runner.ProcessResult:
        """One command of an attempt, under its guard (stop, fence, lease),
        its output captured and its identity noted in the state folder."""
        program = argv[0]
        claim = guard.claim
        about = Command(
            name,
            tuple(runner.render_argv(argv, context.placeholders())),
            argv,
            cwd,
            env,
            state_dir,
            claim.pipeline,
            claim.stage,
            confined=(claim.pipeline if name == "setup" else claim.stage).confined,
        )
        try:
            command = self.wrap(about)
        except ConfigError as exc:
            # A command that would fail every attempt the same way (a program
            # its walls hide), or walls nobody builds: not started, not
            # charged; the tick stops (78).
            raise HostFault(exc) from None
        started_ns = time.time_ns()
        with host_folder("state_root", self.settings.state_root):
            result = runner.run_command(
                command,
                cwd=cwd,
                env=env,
                timeout=guard.claim.stage.timeout_seconds,
                stdin_data=stdin,
                stdout_path=state_dir / f"{name}.out",
                stderr_path=state_dir / f"{name}.err",
                output_cap=self.settings.output_cap_bytes,
                grace=self.settings.kill_grace_seconds,
                on_start=lambda ident: self._note_process(state_dir / f"{name}.proc", ident),
                # Commands over within 10 ms need no note to find their orphans by.
                on_start_after=PROCESS_NOTE_AFTER,
                should_stop=guard,
                # The terminal's live lines, and `<name>.live` for the web tail.
                on_output=both(
                    self.progress.output(state_dir), live_spool(state_dir / f"{name}.live")
                ),
            )
        self.ended(claim, about, CommandRan(started_ns, time.time_ns(), result.exit_code))
        if result.start_error is None:
            mark_started(state_dir)  # it ran: recovery may charge the attempt
        elif runner.program_cannot_start(result.start_error) and _configured(program):
            # The configuration's program is missing or not executable (cron's
            # PATH lacks it): every attempt would fail the same way. As for a
            # program the walls hide: not charged; the tick stops (78). Not a
            # hold: the next tick claims it again (another `host_error` row)
            # and stops there too, before other pipelines' tasks.
            raise HostFault(
                ConfigError(
                    f"{name} of stage {guard.claim.stage.name}: {result.start_error} "
                    f"(PATH {env.get('PATH', '')!r}); no attempt spent: the task stays "
                    "ready, and every tick stops at it until the program starts"
                )
            )
        if result.capture_error is not None:
            # The output is whole in memory, the verdict in it counts; the
            # host's fault still stops the tick claiming (74/77).
            error = host_error(
                f"cannot write state_root {self.settings.state_root}", result.capture_error
            )
            if not safefs.planted(result.capture_error):
                self.tick.host_fault(error)
            self.notes.note_capture(state_dir, f"{name} output not fully captured: {error}")
        return result

    def environment(
        self, pipeline: PipelineConfig, stage: StageConfig, ours: dict[str, str]
    ) -> dict[str, str]:
        """The child's environment: the stage's filtered base (built once per
        tick, pipeline and stage) plus this attempt's ORCHESTRATOR_* values."""
        key = (pipeline.name, stage.name)
        base = self._environments.get(key)
        if base is None:
            # `[orchestrator] env` under the stage's own `secrets` and `env`.
            extra = {
                **self.settings.shared_env(os.environ),
                **agent_runtime.stage_extra_env(stage, self.settings.secret_sources(os.environ)),
            }
            base = runner.child_environment(
                os.environ, deny=self.settings.child_deny, extra=extra, orchestrator_vars={}
            )
            self._environments[key] = base
        return {**base, **runner.child_environment({}, deny=(), extra={}, orchestrator_vars=ours)}

    def _note_process(self, path: Path, ident: runner.ProcessIdentity) -> None:
        """Note the child's identity for recovery (`runner.ProcessIdentity.read_note`),
        and for the attempt's record (its last process). A disk that cannot
        take the note does not fail the command, which is already running:
        recovery still finds it by its process tag. Like a capture file, the
        failure is noted on the attempt and stops the tick claiming (74/77),
        the same whether the command outlived the note's 10 ms or not."""
        mark_started(path.parent)
        try:
            ident.write_note(path)
        except OSError as exc:
            error = host_error(f"cannot write state_root {self.settings.state_root}", exc)
            if not safefs.planted(exc):
                self.tick.host_fault(error)
            self.notes.note_capture(path.parent, f"process note not written: {error}")
        self.notes.note_process(path.parent, ident)
        fault_point("after_spawn_recorded")


def _configured(program: str) -> bool:
    """A program the configuration names (on PATH, or by absolute path),
    not one the task's workspace holds (a relative path: the task's to make)."""
    if program.startswith("{config_dir}"):
        return True
    return "{" not in program and ("/" not in program or program.startswith("/"))
