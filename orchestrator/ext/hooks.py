"""What a feature declares: a `Feature` (its name and what it adds), and
the `TickHooks` its `tick` factory builds once per `Ticker`.

A hook is a typed field, not a name looked up at run time: mypy checks
each one where a feature sets it and where the engine calls it. Only the
points a moved feature needs exist; a new point comes with the feature
that needs it (`docs/decisions/extension-seam.md`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # Annotations only: a feature's package (which config reads its keys
    # from) can declare its `Feature` without loading the engine's vocabulary.
    from sqlalchemy import Connection

    from orchestrator.config import PipelineConfig, Settings, StageConfig
    from orchestrator.config.schema import Section
    from orchestrator.ext.model import (
        AttemptRun,
        Claim,
        ClaimSearch,
        Command,
        CommandRan,
        Refusal,
        RoundEnd,
        Slot,
        TickOptions,
        TickReport,
    )
    from orchestrator.ext.ports import Kernel
    from orchestrator.storage import repo


@dataclass(frozen=True)
class _TickPoints:
    """The tick as a whole: its start and end, around its claims, after
    recovery; each outside any transaction."""

    tick_started: Callable[[TickOptions], None] | None = None
    """First thing of a tick that runs (not a dry run), before recovery;
    outside any transaction. Notes the time and nothing else: no query,
    no command, no write; must not raise."""

    tick_ended: Callable[[TickOptions, TickReport, int], None] | None = None
    """Last thing of a tick, however it ended (an error on its way out
    too), once its row was closed with its exit status (`int`); outside any
    transaction. Reads the report; changes nothing of the tick (its status
    is written) and must not raise or wait on anything slow: the tick's
    exit waits for it."""

    before_claims: Callable[[TickOptions], None] | None = None
    """After recovery and the approved gates' advance, before the first
    claim; outside any transaction. May write through `Kernel.tx` (its own
    short transactions) and run commands. Finishes what earlier ticks
    left (a task waiting to land) without waiting on another host."""

    after_claims: Callable[[TickOptions], None] | None = None
    """After the claim loop ended and every attempt of this tick was
    recorded; outside any transaction, before the tick's row is closed.
    May write and run commands as `before_claims`."""

    after_recovery: Callable[[], None] | None = None
    """At the end of recovery, once the dead ticks' attempts were closed,
    before the approved gates advance; outside any transaction. May run
    git and its own short transactions, finishing what a dead tick left
    (a decided round not yet settled onto its branch)."""


@dataclass(frozen=True)
class _ClaimPoints:
    """Inside a claim's or a record's transaction (given its `Connection`,
    never a command runner)."""

    refuse_claim: Callable[[Connection, StageConfig, datetime], Refusal | None] | None = None
    """Inside the claim's transaction (its `Connection`, no command runner),
    once the claim has found a task of `StageConfig` and before it opens the
    attempt; `datetime` is the database's now. May lock and write its own
    rows, which commit with the claim when it admits; a refusal must leave
    nothing held or written (on PostgreSQL, roll back to a savepoint), since
    the claim goes on to other tasks in the same transaction. The first
    refusal wins ("first non-None"): later features are not asked. Called
    per candidate task: a stage it does not govern returns None at once."""

    leave_task: Callable[[Connection, repo.TaskSnapshot], str | None] | None = None
    """Inside the claim's transaction, once the claim has found a ready
    task and before its pipeline is looked up (so before a stage the config
    lost can halt it), and likewise in an approved gate's advance: a
    non-None answer (why) leaves the task as it is (ready, or approved) and
    passes over it for the rest of this claim; the first non-None wins.
    Reads only. For a task this host must not run now (a version it does
    not hold) without halting or changing it; the feature says why itself
    (its own log line, its `explain`): the engine only passes over it."""

    pipeline_of: (
        Callable[[Connection, repo.TaskSnapshot, PipelineConfig | None], PipelineConfig | None]
        | None
    ) = None
    """The pipeline a task runs, asked inside the transaction that claims it
    or moves its approved gate on (and when a lost claim's commit is found
    again by its token), before its stage is looked up; the third argument
    is the configured pipeline of the task's name (None: the config lacks
    it). Reads only. The first non-None answer wins ("first non-None");
    when every feature answers None the task runs the configured one. What
    it returns must come from this host's own disk, never from a row: it
    decides which commands run."""

    after_claim: Callable[[Connection, Claim, datetime], None] | None = None
    """Inside the claim's transaction (its `Connection`, no command runner),
    once a task is claimed: its attempt opened and the task marked running
    (a candidate slot of a round too); `datetime` is the database's now.
    May write its own rows and its own columns of the claimed task and
    attempt, which commit with the claim or not at all; must not refuse or
    change the claim. Not called again for a claim found by its token after
    a lost commit: that claim's first try ran it and committed."""

    would_refuse: Callable[[Connection, StageConfig, datetime], Refusal | None] | None = None
    """The dry run's `refuse_claim`: the refusal a claim would meet now,
    inside the dry run's read transaction. Reads only: no lock, no write.
    First non-None, as `refuse_claim`."""

    claim_first: Callable[[Connection, ClaimSearch], Claim | None] | None = None
    """Inside the claim's transaction (its `Connection`, no command runner),
    after the schema check and before the engine looks for a ready task.
    May open an attempt of a task already running (a round's next slot:
    no transition, the task's version unchanged) and return its `Claim`,
    which the tick runs like any; it asks `ClaimSearch.refused` for the
    stage first. The first non-None wins. Called per claim: a feature with
    nothing running returns None before any query."""

    open_attempt: (
        Callable[
            [Connection, repo.TaskSnapshot, StageConfig, dict[str, Any]], tuple[int, Slot] | None
        ]
        | None
    ) = None
    """Inside the claim's transaction, once a ready task's claim was
    admitted and before its claim transition: may insert the attempt's
    row itself, from the engine's columns (`dict`) and its own, and return
    its id and the `Slot` the `Claim` carries (the first of a round).
    None: the engine opens the row. The first non-None wins. Called per
    claim: a stage it does not govern returns None before any query."""

    slot_of: Callable[[Connection, int], Slot | None] | None = None
    """Inside the caller's transaction (a retried claim's, recovery's read
    or close): the `Slot` of the attempt row whose id is given, when it is
    one of a round; reads only. The first non-None wins."""

    decide_round: Callable[[Connection, repo.TaskSnapshot, Slot, datetime], RoundEnd] | None = None
    """After the verdict: inside the transaction that closed one attempt of
    a round (the record's, or recovery's close of a crashed one), which
    holds the task's row; `datetime` is the database's now. The engine
    asks no `decide` for such an attempt: this point turns the attempt
    into a round, deciding the round (through `Kernel.applier`) once its
    last slot ended, and says the attempt's line's tail. The first one set
    answers. Runs again when the transaction is retried."""

    open_gate: Callable[[Connection, Claim, datetime], str | None] | None = None
    """Inside the transaction recording the attempt (its `Connection`, no
    command runner), right after a passing verdict at a gated stage was
    written as `S:awaiting_approval` (that write holds the task's row to the
    commit); `datetime` is the database's now. May read and write its own
    rows (and lock what it counts, so two hosts never both decide on the
    same record), and returns the reason with which the gate opens by
    itself: the engine then writes `approve` with actor `verifier`
    (`GATE_ACTOR`) and that reason. None: the gate waits for a person. The
    first non-None wins. Called only at a gated stage's passing verdict;
    runs again when the record's transaction is retried."""

    after_record: Callable[[Connection, Claim, AttemptRun, datetime], None] | None = None
    """Inside the transaction recording the attempt (its `Connection`, no
    command runner), after the attempt's row is closed and its decision
    applied; `datetime` is the database's now. May write its own rows and
    events (through the outbox), which commit with the record or not at
    all, and say a line after the commit (`Kernel.tx.say_after_commit`).
    Runs again when the record's transaction is retried."""

    hold_finished: (
        Callable[[Connection, repo.TaskSnapshot, str | None, str | None], str | None] | None
    ) = None
    """Inside the landing's record transaction (the landed commit, the pull
    request's URL; either None), before the task is written `complete`: a
    feature following what landed (a pull request until merged or closed)
    may write its own rows and return the hold's reason; the task goes
    `held` (`hold`) and that feature moves it on later in its own
    transactions. First non-None wins; runs again on a retry."""


@dataclass(frozen=True)
class _AttemptPoints:
    """On an attempt's thread, around its workspace and its commands; each
    outside any transaction."""

    before_workspace: Callable[[Claim], None] | None = None
    """On the attempt's thread, before the task's worktree is made and
    before any command of the attempt runs in it; outside any transaction.
    May end processes and remove files of its own; must not write the
    database (the attempt's fence is the engine's). Called on the hot
    path: a feature with nothing to do returns after one cheap look."""

    attempt_workspace: Callable[[Claim], Path | None] | None = None
    """On the attempt's thread, outside any transaction, before anything of
    the attempt runs: where the claim's commands run when it is not the
    task's workspace (a candidate's own worktree). Pure: no git, no query,
    no file made. The first non-None wins. Called twice per attempt: return
    None at once for a claim not concerned."""

    around_workspace: (
        Callable[[Claim, Callable[[], AttemptRun | None]], AttemptRun | None] | None
    ) = None
    """On the attempt's thread, outside any transaction, for a pipeline
    with a `repository`, around the making of the task's worktree: handed
    the rest (`Callable`: the next feature's, last the engine's task
    worktree and its setup), it may call it once, under a lock, or not at
    all, make a workspace of its own (its git steps; reads and short
    transactions through `Kernel.tx`), and returns None when the attempt
    may run or the attempt's result when it may not; raising `HostFault`
    makes it the host's. Nested in `FEATURES` order, the first outermost."""

    attempt_env: Callable[[Claim], Mapping[str, str] | None] | None = None
    """On the attempt's thread, outside any transaction, before its
    workspace is prepared: variables the attempt's worker and verifier are
    given beside the engine's ORCHESTRATOR_* ones (which win a name both
    set); each is also a field of the stage's prompt, named by its
    lowercased tail (`ORCHESTRATOR_NOTES` is `{notes}`). Names must start
    with `ORCHESTRATOR_`. Each feature's are merged, in `FEATURES` order.
    Pure: no git, no query, no file made; None for a claim not concerned
    (called per attempt)."""

    note_start: Callable[[Claim], bool] | None = None
    """On the attempt's thread, before its worker runs, outside any
    transaction: may record the attempt's starting commit itself (its own
    short transaction, fenced by the lease token) and return True; False:
    the engine notes the workspace's HEAD. The first True wins."""

    keep_work: Callable[[Claim, Path, AttemptRun], bool] | None = None
    """On the attempt's thread, once worker and verifier ran (the `Path` is
    where they ran), before the runaway guards, `after_run` and the record;
    outside any transaction. May keep the attempt's work its own way (a
    commit, a ref: git steps), change the `AttemptRun` (`commit_sha`, a
    failed commit's outcome and error) and return True, in place of the
    engine's snapshot and stage commit; False: the engine keeps it. The
    first True wins."""

    after_recorded: Callable[[Claim], None] | None = None
    """On the attempt's thread, after the transaction recording it
    committed (not after a record that failed); outside any transaction.
    May run git and its own short transactions (a decided round's winner
    made the branch's tip). Called for every attempt: return at once when
    not concerned."""

    after_run: Callable[[Claim, AttemptRun, Path], None] | None = None
    """On the attempt's thread, once worker, verifier and the runaway
    guards are done with the attempt and before the transaction that
    records it; outside any transaction. May read the attempt's folder
    (`Path`) and change the `AttemptRun` (its outcome, error, backoff, what
    it carries to `after_record`); must not write the database or run
    commands. Called for every attempt: return at once when not concerned."""

    attempt_feedback: Callable[[Claim, Path], tuple[str, Path] | None] | None = None
    """On the attempt's thread, its state folder (`Path`) made, before its
    prompt is rendered; outside any transaction. May read the database and
    write a file in that folder; returns what came back from outside (a
    review): `{feedback}`'s text and the JSON file `ORCHESTRATOR_FEEDBACK`
    names. First non-None wins; per attempt: None at once if not concerned."""

    command_ended: Callable[[Claim, Command, CommandRan], None] | None = None
    """On the attempt's thread, right after one of its commands (setup,
    worker, verifier) ended or failed to start, before its outcome is
    judged; outside any transaction. Sees the command as the config
    rendered it (before any wrap) and when it ran; changes nothing, must
    not raise, and returns at once (it is on the attempt's path)."""

    wrap_command: Callable[[Command], tuple[str, ...] | None] | None = None
    """Just before the engine starts a command (setup, worker, verifier) or
    a feature asks the kernel to (`Kernel.wrap`: the land check), on the
    thread that starts it (the attempt's, the tick's for the land check),
    after its argv is rendered; outside any transaction. Returns the argv
    to run instead (the command inside walls), or None when not concerned:
    the first non-None wins, and later features are not asked. May look at
    the host's files (what the walls bind back) and raise `ConfigError` to
    refuse a command that could never run there (not started, not charged:
    the tick stops, 78); must not start processes or write files or the
    database. Called for every command: a command whose config asks for
    nothing returns None at once, importing nothing. A `Command.confined`
    that no hook wraps is refused by the engine (fail closed)."""


@dataclass(frozen=True)
class TickHooks(_TickPoints, _ClaimPoints, _AttemptPoints):
    """The points where the engine calls a feature during a tick. Every
    field is optional; the `Registry` keeps only those set, in `FEATURES`
    order, and calls each one that is set ("each" dispatch). The fields are
    declared in three groups by where they run (the bases hold declarations
    only, no behaviour); a feature sets them by keyword."""


@dataclass(frozen=True)
class Feature:
    """One capability, registered by one line in `features/__init__.py`.

    `config`: its keys (`Section`s, usually `extension=True`), read by the
    loader and listed in the configuration reference after the engine's.
    `tables` names the module holding its tables (imported lazily, so
    `--help` loads no SQLAlchemy). `commands` maps a CLI verb to the
    "module:attr" of its click command, which the root group imports on
    first use. `explain` is the "module:attr" of a function
    `(Connection, Settings, TaskSnapshot) -> Explained | None` adding the
    feature's key to `explain` (`ext.views`). Declaring these imports
    nothing: each is a name resolved when asked for."""

    name: str
    config: Sequence[Section[Any]] = ()
    tables: str | None = None
    commands: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    tick: Callable[[Kernel], TickHooks] | None = None
    explain: str | None = None
    stages_of: str | None = None
    """"module:attr" of a function `(Connection, TaskSnapshot) -> tuple of
    stage names | None`: the stages a person's gate command (`approve`,
    `reject --to`) checks the task's stage against, inside that command's
    write transaction; reads only. The first non-None answer wins; None from
    every feature: the configured pipeline's."""
    added: Callable[[Connection, Settings, Mapping[str, str], datetime], None] | None = None
    """Inside `add`'s transaction (`Project.add`, `add`, an agent's
    `add_subtask`), after the new tasks' rows and their `add` transitions
    are inserted; the `Mapping` is each new task's slug to its pipeline's
    name, `datetime` the database's now. May write its own rows and its own
    columns of the new tasks, which commit with them or not at all; runs no
    command (the transaction holds the database's write lock)."""
