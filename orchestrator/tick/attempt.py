"""One attempt, from its folders to its verdict: the workspace, the prompt,
the worker, the verifier, and what their ends and output make of it."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterator
from pathlib import Path

from sqlalchemy import Engine

from orchestrator import runner, safefs
from orchestrator.agents import resume as agent_resume
from orchestrator.agents import runtime as agent_runtime
from orchestrator.config import Settings, StageConfig
from orchestrator.domain.decide import IGNORED, NOT_COUNTED, Outcome, verdict_outcome
from orchestrator.domain.slug import slug_problem
from orchestrator.domain.text import clean_text
from orchestrator.domain.verdict import parse_verdict, strict_pass_problem
from orchestrator.ext.model import AttemptRun, Chain, Claim, Ended
from orchestrator.ext.registry import Registry
from orchestrator.storage import repo
from orchestrator.storage.db import read_tx
from orchestrator.testing import fault_point
from orchestrator.tick import branches, samples, snapshots
from orchestrator.tick.attempt_context import AttemptContext
from orchestrator.tick.briefing import Briefer
from orchestrator.tick.commands import CommandRunner
from orchestrator.tick.fence import FenceGuard
from orchestrator.tick.kept import database_fault, forget_kept, keep_result, reserve_kept
from orchestrator.tick.lookups import attempt_folder
from orchestrator.tick.notes import AttemptNotes
from orchestrator.tick.progress import Progress
from orchestrator.tick.recording import Recorder
from orchestrator.tick.runaway import RunawayGuards
from orchestrator.tick.steps import (
    HostFault,
    accepted_exit,
    failure,
    host_folder,
    no_verdict,
    stopped_run,
)
from orchestrator.tick.tick_run import TickRun
from orchestrator.tick.transactions import Transactions
from orchestrator.tick.workspaces import WorkspacePreparer
from orchestrator.workspace.start import note_start

# Outcomes that neither end nor continue a run of pending verdicts.
_PASSED_OVER = frozenset(o.value for o in (*NOT_COUNTED, *IGNORED, Outcome.BACKOFF))


def _awaits_verdict(engine: Engine, task: repo.TaskSnapshot) -> bool:
    with read_tx(engine) as conn:
        return repo.awaits_verdict(conn, task)


class AttemptRunner:
    """One attempt in a pool thread: run it, then record it; a result the
    record could not take is kept for recovery, never lost.

    Reads through the briefer, writes the attempt's record through the
    recorder and renews its lease through its `FenceGuard`; itself it writes
    only the workspace's starting commit on the attempt (`note_start`) and a
    passed stage's commit on the task branch (`tick.branches`). Its files:
    the attempt's state folder (`prompt.md`, the kept result). Of the tick:
    `stop`, `db_down`, its host fault, the notes on the attempt."""

    def __init__(
        self,
        settings: Settings,
        tx: Transactions,
        tick: TickRun,
        notes: AttemptNotes,
        commands: CommandRunner,
        workspaces: WorkspacePreparer,
        briefer: Briefer,
        runaway: RunawayGuards,
        recorder: Recorder,
        progress: Progress,
        registry: Registry | None = None,
    ) -> None:
        self.settings = settings
        self.tx = tx
        self.tick = tick
        self.notes = notes
        self.commands = commands
        self.workspaces = workspaces
        self.briefer = briefer
        self.runaway = runaway
        self.recorder = recorder
        self.progress = progress  # live lines on a terminal
        self.registry = registry or Registry.empty()  # `after_run` (a usage limit)

    def attempt(self, claim: Claim, chain: Chain | None) -> Ended:
        """Run and record one attempt (and, with `chain`, claim the next)."""
        folder = attempt_folder(self.settings, claim.task.slug, claim.stage.name, claim.number)
        try:
            reserve_kept(folder, claim)  # makes the folder, fresh
            with self.progress.running(claim.task.slug, claim.stage.name, claim.number, folder):
                result = self._execute(claim)
        except safefs.FolderExists as exc:  # another hand's: not used, not counted
            result = AttemptRun(
                Outcome.HOST_ERROR, error=f"attempt folder {exc.filename} {exc.strerror}"
            )
        except HostFault as fault:
            result = self.tick.host_fault(fault.error)
        except Exception as exc:  # one task's failure never stops the tick
            result = AttemptRun(Outcome.WORKER_ERROR, error=f"internal error: {exc}")
        note = self.notes.take_capture(folder)
        if note is not None and result.outcome is not Outcome.HOST_ERROR:
            result.error = note if result.error is None else f"{result.error}; {note}"
        if result.fence_lost and self.tick.db_down.is_set():
            # Stopped because the database stayed out of reach, not by the
            # worker's doing: an outcome that counts toward nothing.
            result = dataclasses.replace(
                result,
                outcome=Outcome.DATABASE_ERROR,
                error="stopped: the database was out of reach",
                fence_lost=False,
            )
        try:
            self.runaway.judge(claim, result)
        except Exception as exc:  # a guard's failure must not lose the attempt's result
            result.error = f"{result.error or ''}; runaway guards skipped: {exc}".lstrip("; ")
        self.registry.after_run(claim, result, folder)
        fault_point("before_record")
        try:
            recorded = self.tx.retrying(
                functools.partial(self.recorder.record, claim, result, chain)
            )
        except Exception as exc:
            keep_result(folder, claim, result, database=database_fault(exc))
            raise
        forget_kept(folder)  # the reserve, no longer needed
        self.registry.after_recorded(claim)  # e.g. a decided round's winner made the tip
        return recorded

    def _workspace(self, claim: Claim) -> Path:
        """Where the claim's commands run: the task's workspace, unless a
        feature gives it one of its own."""
        found = self.registry.attempt_workspace(claim)
        return self.settings.workspace_root / claim.task.slug if found is None else found

    def _execute(self, claim: Claim) -> AttemptRun:
        slug, stage = claim.task.slug, claim.stage
        problem = slug_problem(slug)
        if problem is not None:
            return AttemptRun(Outcome.WORKER_ERROR, error=problem)
        state_dir = attempt_folder(self.settings, slug, stage.name, claim.number)
        with host_folder("state_root", self.settings.state_root):
            state_dir.mkdir(parents=True, exist_ok=True)
        guard = FenceGuard(self.tick, self.tx, claim)
        workspace = self._workspace(claim)
        context = AttemptContext.of(claim, workspace, self.settings.base_dir)
        context = context.with_extra(self.registry.attempt_env(claim))
        tag = runner.process_tag(claim.token)
        # Setup writes its capture files and marker in state_root: an error
        # naming a file there is that folder's, any other the workspace's.
        with (
            host_folder("state_root", self.settings.state_root),
            host_folder("workspace_root", self.settings.workspace_root),
        ):
            prepared = self.workspaces.prepare(claim, context, state_dir, guard, tag)
        if prepared is not None:
            return prepared
        brief = self.briefer.context(claim)
        if isinstance(brief, AttemptRun):
            return brief
        context = context.with_brief(brief, self.briefer.write_context(brief, state_dir))
        context = context.with_feedback(self.registry.attempt_feedback(claim, state_dir))
        with host_folder("state_root", self.settings.state_root):
            prompt_file, prompt_text = self._render_prompt(claim, context, state_dir)
        context = context.with_prompt(prompt_file)
        env = self.commands.environment(
            claim.pipeline, stage, {**context.environment(), runner.PROCESS_TAG: tag}
        )
        stdin = (
            clean_text(prompt_text).encode() if stage.stdin == "prompt" and prompt_text else None
        )

        def run(name: str, argv: tuple[str, ...]) -> runner.ProcessResult:
            named_env = agent_runtime.command_env(env, state_dir, name)  # its usage file

            def one(command: tuple[str, ...]) -> runner.ProcessResult:
                return self.commands.run(
                    name, command, context, workspace, named_env, state_dir, guard, stdin
                )

            if name != "worker":
                return one(argv)
            # `resume = true`: the previous attempt's session, or a fresh one.
            return agent_resume.run_worker(
                stage,
                context.prev_session,
                argv,
                one,
                lambda said: agent_resume.note_resume(state_dir, said),
            )

        with self._door(claim, state_dir, env):
            ran = self._worker_and_verifier(claim, run, guard, state_dir)
        if not self.registry.keep_work(claim, workspace, ran):  # a feature's own way
            snapshots.keep(claim, workspace, ran)  # passed or not, before the record
            branches.commit_passed(claim, workspace, ran)
        return ran

    def _worker_and_verifier(
        self,
        claim: Claim,
        run: Callable[[str, tuple[str, ...]], runner.ProcessResult],
        guard: FenceGuard,
        state_dir: Path,
    ) -> AttemptRun:
        """Run the stage's worker, then its verifier, and judge the verdict."""
        stage = claim.stage
        workspace = self._workspace(claim)
        verdict_text: str | None = None
        worker_exit: int | None = None
        last: runner.ProcessResult | None = None  # whose output holds the verdict
        # Where this stage's diff at its gate begins (the first attempt's).
        if not self.registry.note_start(claim):  # a feature's own workspace notes its own
            self.tx.retrying(
                lambda _: note_start(self.tx.engine, claim.attempt_id, claim.token, workspace)
            )
        # A recheck after a pending verdict asks the verifier again and
        # leaves the worker be: its work is what is being waited on.
        recheck = stage.verifier is not None and self._rechecks(claim)
        if stage.worker is not None and not recheck:
            self.runaway.before(claim.attempt_id, stage, workspace)
            worker = last = run("worker", stage.worker)
            self.runaway.worker_ended(claim.attempt_id, workspace)
            worker_exit = worker.exit_code
            stopped = stopped_run(worker, guard, "worker")
            if stopped is not None:
                stopped.worker_exit = worker_exit
                return stopped
            if not worker.ok and not accepted_exit(worker, stage):
                # An agent's envelope says why (Claude Code prints errors to stdout).
                error = agent_runtime.with_reported_error(
                    failure("worker", worker), stage.output, worker.stdout
                )
                return AttemptRun(Outcome.WORKER_ERROR, error=error, worker_exit=worker_exit)
            said = agent_runtime.read_output(stage.output, worker.stdout)
            if said.error is not None:  # the agent's envelope says it failed
                return AttemptRun(Outcome.WORKER_ERROR, error=said.error, worker_exit=worker_exit)
            verdict_text = said.message
        fault_point("after_worker")
        verifier_exit: int | None = None
        sampled: list[AttemptRun] = []  # `verifier_samples` > 1: each sample's judgement
        for sample in range(stage.verifier_samples if stage.verifier is not None else 0):
            assert stage.verifier is not None
            verifier = last = run(samples.capture_name(sample), stage.verifier)
            verifier_exit = verifier.exit_code
            stopped = stopped_run(verifier, guard, "verifier")
            if stopped is not None:
                stopped.worker_exit, stopped.verifier_exit = worker_exit, verifier_exit
                return stopped
            if verifier.start_error is not None:
                return AttemptRun(
                    Outcome.VERIFIER_ERROR,
                    error=f"verifier could not start: {verifier.start_error}",
                    worker_exit=worker_exit,
                )
            said = agent_runtime.read_output(stage.verifier_output, verifier.stdout)
            if said.error is not None:
                return AttemptRun(
                    Outcome.VERIFIER_ERROR,
                    error=said.error,
                    worker_exit=worker_exit,
                    verifier_exit=verifier_exit,
                )
            verdict_text = said.message
            if stage.verifier_samples > 1:
                exits = (worker_exit, verifier_exit)
                sampled.append(self._judge(stage, verdict_text, last, state_dir, exits))
        fault_point("after_verifier")
        if sampled:
            return samples.combine(sampled, stage.pass_score)
        return self._judge(stage, verdict_text, last, state_dir, (worker_exit, verifier_exit))

    @contextlib.contextmanager
    def _door(self, claim: Claim, state_dir: Path, env: dict[str, str]) -> Iterator[None]:
        """A sandboxed stage's commands reach the orchestrator (`orchestrator
        mcp`) only through the door the tick serves for this task while they
        run (`mcp.door_socket`), named in their `ORCHESTRATOR_DOOR`: the
        sandbox sees neither the config nor the database."""
        if not claim.stage.confined:
            yield
            return
        # Imported here: the library's writes and the read side cost a tick
        # ~0.1 s to import, and only a sandboxed attempt needs them.
        from orchestrator.mcp import door_socket

        with door_socket.serving(
            self.settings, self.tx.engine, claim.task.slug, state_dir, self.registry.tasks_added
        ) as path:
            env[door_socket.DOOR_ENV] = str(path)
            yield

    def _rechecks(self, claim: Claim) -> bool:
        """Whether this attempt asks a pending verdict again: the previous
        attempt was pending, or only attempts that count toward nothing
        (an interrupted recheck) came after a pending one."""
        if claim.prev_outcome == Outcome.PENDING.value:
            return True
        if claim.prev_outcome not in _PASSED_OVER:
            return False
        return bool(self.tx.retrying(lambda _again: _awaits_verdict(self.tx.engine, claim.task)))

    def _judge(
        self,
        stage: StageConfig,
        verdict_text: str | None,
        last: runner.ProcessResult | None,
        state_dir: Path,
        exits: tuple[int | None, int | None],
    ) -> AttemptRun:
        """The attempt's outcome from the verdict its last command printed."""
        worker_exit, verifier_exit = exits
        verdict = parse_verdict(verdict_text or "")
        if verdict is None:
            source = "verifier" if stage.verifier is not None else "worker"
            return AttemptRun(
                Outcome.INVALID_VERDICT,
                error=no_verdict(source, last, state_dir),
                worker_exit=worker_exit,
                verifier_exit=verifier_exit,
            )
        if verdict.pending:  # rechecked later; spends nothing (`decide`)
            return AttemptRun(
                Outcome.PENDING,
                verdict=verdict,
                worker_exit=worker_exit,
                verifier_exit=verifier_exit,
                backoff_seconds=verdict.recheck_seconds,
            )
        strict = strict_pass_problem(verdict_text or "") if stage.strict_verdict else None
        if strict is not None:  # a gate's `pass` must be a real boolean
            return AttemptRun(
                Outcome.INVALID_VERDICT,
                error=strict,
                worker_exit=worker_exit,
                verifier_exit=verifier_exit,
            )
        return AttemptRun(
            verdict_outcome(verdict, stage.pass_score),
            verdict=verdict,
            worker_exit=worker_exit,
            verifier_exit=verifier_exit,
        )

    def _render_prompt(
        self, claim: Claim, context: AttemptContext, state_dir: Path
    ) -> tuple[Path | None, str]:
        template_path = claim.stage.prompt
        if template_path is None:
            return None, ""
        template = template_path.read_text(encoding="utf-8", errors="replace")
        text = context.render_prompt(template)
        path = state_dir / "prompt.md"
        safefs.replace(path, text.encode("utf-8"))
        return path, text
