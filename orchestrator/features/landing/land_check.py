"""The land check as an attempt's commands run: its output captured and
its process noted in the task's state folder (`<slug>/land/check.*`), the
landing's tag in its environment, and wrapped as the engine wraps an
attempt's commands (`Kernel.wrap`): inside the stage's walls when the
pipeline is sandboxed (the check runs the branch's code: a planted
`conftest.py` must reach no more than the worker that wrote it), and
refused, never run unwrapped, when no feature builds them.

A tick killed during the check leaves it running (and its note, written
before the check starts, so even a tick killed between the spawn and the
child's identity leaves one); before the next check of the task starts,
and before any command of an attempt runs in the task's worktree
(`end_left_check`: a halt, resume or send-back after the kill), what the
dead one started is ended by its note and its tag.
The landing's git steps stay in `merge.py`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from orchestrator import runner, safefs
from orchestrator.config import PipelineConfig, Settings
from orchestrator.ext.model import PROCESS_NOTE_AFTER, Command
from orchestrator.ext.ports import Kernel

FOLDER = "land"  # under state_root/<slug>; no stage's attempt folder is named so
NOTE = "check.proc"


def land_tag(settings: Settings, task_id: int, slug: str) -> str:
    """The tag of everything a landing of this task starts: the same for
    every tick of this project, so a later one finds what a dead one left,
    and another project's on this host (its own state folder) never."""
    return runner.process_tag(f"land:{land_folder(settings, slug).resolve()}:{task_id}")


def land_folder(settings: Settings, slug: str) -> Path:
    return settings.state_root / slug / FOLDER


def check_environment(
    settings: Settings, slug: str, secrets: tuple[str, ...] = ()
) -> dict[str, str]:
    """The environment `land_check` (and `git push`, `gh`) is given: the
    tick's, without what `child_deny` names, with `[orchestrator] env` and
    the pipeline's `land_secrets` (from the environment, else `env_file`)
    and `ORCHESTRATOR_TASK`. `doctor` probes the check's interpreter in it
    too (from its own shell)."""
    sources = settings.secret_sources(os.environ)
    return runner.child_environment(
        os.environ,
        deny=settings.child_deny,
        extra={
            **settings.shared_env(os.environ),
            **{name: sources[name] for name in secrets if name in sources},
        },
        orchestrator_vars={"ORCHESTRATOR_TASK": slug},
    )


def end_land_check(settings: Settings, task_id: int, slug: str) -> None:
    """End what an earlier landing of the task left running (its noted
    group, then anything carrying its tag): nothing runs beside a check."""
    grace = settings.kill_grace_seconds
    ident = runner.ProcessIdentity.read_note(land_folder(settings, slug) / NOTE)
    if ident is not None:
        runner.kill_process_group(ident, grace=grace)
    runner.kill_tagged(land_tag(settings, task_id, slug), grace=grace)


def end_left_check(settings: Settings, task_id: int, slug: str) -> None:
    """Before anything runs in the task's worktree: a check a killed tick
    left (its note is still there; a check that ended removed it) is ended
    first, so no worker or verifier shares the worktree with it. One stat
    when there is none, so an attempt pays nothing for landings."""
    note = land_folder(settings, slug) / NOTE
    if not note.exists():
        return
    end_land_check(settings, task_id, slug)
    with contextlib.suppress(OSError):
        note.unlink()


class LandCheck:
    """`LandRequest.run_check` for one task's landing."""

    def __init__(
        self, kernel: Kernel, pipeline: PipelineConfig, task_id: int, slug: str, stage: str
    ) -> None:
        self.kernel = kernel  # the engine's wrap, for a sandboxed check
        self.settings = kernel.settings
        self.pipeline = pipeline
        self.task_id = task_id
        self.slug = slug
        self.stage = stage

    def __call__(
        self, argv: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float
    ) -> runner.ProcessResult:
        folder = land_folder(self.settings, self.slug)
        folder.mkdir(parents=True, exist_ok=True)
        end_land_check(self.settings, self.task_id, self.slug)
        # Said before the check exists: a tick that dies between the spawn
        # and the child's note still leaves the note's file, and with it
        # `end_left_check` ends the check by its tag.
        _starting(folder / NOTE)
        env = {**env, runner.PROCESS_TAG: land_tag(self.settings, self.task_id, self.slug)}
        # Walls when any stage of the pipeline (or its setup) has them: the
        # sandbox picks which (the landing stage's first).
        confined = self.pipeline.confined or any(s.confined for s in self.pipeline.stages)
        command = self.kernel.wrap(
            Command(
                "land_check",
                tuple(argv),
                tuple(argv),
                cwd,
                env,
                folder,
                self.pipeline,
                self.pipeline.stage(self.stage),
                confined=confined,
            )
        )
        result = runner.run_command(
            command,
            cwd=cwd,
            env=env,
            timeout=timeout,
            stdout_path=folder / "check.out",
            stderr_path=folder / "check.err",
            output_cap=self.settings.output_cap_bytes,
            grace=self.settings.kill_grace_seconds,
            on_start=lambda ident: _note(ident, folder / NOTE),
            on_start_after=PROCESS_NOTE_AFTER,
        )
        # Ended (its group and escaped descendants are gone): nothing of it
        # is left for `end_left_check` to find.
        with contextlib.suppress(OSError):
            (folder / NOTE).unlink()
        return result


def _starting(path: Path) -> None:
    """A note holding no identity yet (`read_note` gives None for it)."""
    with contextlib.suppress(OSError):
        safefs.replace(path, b"{}")


def _note(ident: runner.ProcessIdentity, path: Path) -> None:
    # A disk that cannot take the note leaves the tag to find it by.
    with contextlib.suppress(OSError):
        ident.write_note(path)
