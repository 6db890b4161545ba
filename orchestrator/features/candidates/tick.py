"""The candidates' points in a tick (built only when some stage runs
candidates, `configured`). The claim side: a round's further slots
claimed before the engine looks for a ready task (`claim_first`), its
first slot opened by a claim of the stage (`open_attempt`), the slot of an
attempt row (`slot_of`). The git side: a candidate's own worktree
(`attempt_workspace`, `around_workspace`, `note_start`), its work kept as
a commit at its ref (`keep_work`). The record side: the round decided by
its last close (`decide_round`), then settled onto the task's branch
(`after_recorded`, and `after_recovery` for what a dead tick left)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from sqlalchemy import Connection

from orchestrator.ext.hooks import TickHooks
from orchestrator.ext.model import AttemptRun, Claim, ClaimSearch, RoundEnd, Slot
from orchestrator.ext.ports import Kernel
from orchestrator.features.candidates import candidate_worktrees, claims, rounds, settling, slots
from orchestrator.storage import repo


def tick_hooks(kernel: Kernel) -> TickHooks:
    settings, warn = kernel.settings, kernel.tick.warn

    def claim_first(conn: Connection, search: ClaimSearch) -> Claim | None:
        return claims.claim_slot(kernel, conn, search)

    def decide_round(
        conn: Connection, task: repo.TaskSnapshot, slot: Slot, now: datetime
    ) -> RoundEnd:
        return rounds.close(conn, settings, kernel.applier, task, slot, now)

    def attempt_workspace(claim: Claim) -> Path | None:
        return slots.workspace_of(settings, claim)

    def around_workspace(claim: Claim, make: Callable[[], AttemptRun | None]) -> AttemptRun | None:
        engine = kernel.tx.engine
        if not claim.candidate:
            # A stage never starts before the last round's winner is on
            # the branch: otherwise a `HostFault`, not a run on the old tip.
            settling.settle_before(engine, settings, claim, warn)
            return make()
        # The round's candidates start at once: one makes the task's
        # worktree (and its setup), for the stages after the round; once
        # the branch exists a candidate needs only that (its round may be
        # shared with a host whose worktree holds the branch).
        with slots.task_lock(settings, claim.task.slug):
            if not slots.branch_ready(claim):
                made = make()
                if made is not None:
                    return made
        return candidate_worktrees.prepare_candidate(engine, settings, claim, warn)

    def note_start(claim: Claim) -> bool:
        if not claim.candidate:
            return False
        # Its worktree's HEAD: the round's base, which the gate diffs from.
        kernel.tx.retrying(
            lambda _: candidate_worktrees.note_base(kernel.tx.engine, settings, claim)
        )
        return True

    def keep_work(claim: Claim, workspace: Path, run: AttemptRun) -> bool:
        if not claim.candidate:
            return False
        candidate_worktrees.commit_candidate(settings, claim, run)  # passed or not
        return True

    def after_recorded(claim: Claim) -> None:
        if claim.candidate:  # the round may be decided: its winner becomes the tip
            settling.settle(kernel.tx.engine, settings, claim.task.slug, warn)

    def after_recovery() -> None:
        # Rounds decided by a tick that died before its git steps, or just
        # now by recovery's closes: the winner becomes the tip.
        for slug in slots.unsettled(settings):
            settling.settle(kernel.tx.engine, settings, slug, warn)

    return TickHooks(
        claim_first=claim_first,
        open_attempt=claims.open_first,
        slot_of=claims.slot_of,
        decide_round=decide_round,
        attempt_workspace=attempt_workspace,
        around_workspace=around_workspace,
        note_start=note_start,
        keep_work=keep_work,
        after_recorded=after_recorded,
        after_recovery=after_recovery,
    )
