"""The vocabulary the engine and its features share: a tick's options and
report, a claim, what an attempt produced before it is recorded, the retry
wait, and the constants the tick's jobs share. Here, below both, so that a
feature speaks it without importing `tick/`."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection

from orchestrator.agents.limits import UsageLimit
from orchestrator.config import PipelineConfig, StageConfig
from orchestrator.domain.decide import Decision, Outcome
from orchestrator.domain.pipeline import State
from orchestrator.domain.verdict import Verdict
from orchestrator.errors import OrchestratorError
from orchestrator.storage import repo

if TYPE_CHECKING:
    from orchestrator.ext.ports import HostPort

ACTOR = "tick"
# Who opened a gate a feature opened by itself (`TickHooks.open_gate`).
GATE_ACTOR = "verifier"
LEASE_EXPIRED = "lease expired"
FENCE_CHECK_SECONDS = 5.0
ADVANCE_CHECK_SECONDS = 1.0
PROCESS_NOTE_AFTER = 0.01
# The exit status of a tick that swallowed an error to keep the other tasks
# going (EX_SOFTWARE), when the error carries no status of its own.
TICK_ERROR_STATUS = 70
KEPT_RESULT = "result.json"  # in the attempt's state folder: a result not recorded
# Bytes reserved for it when the attempt starts (blanks, which read as no
# result), so a result can still be kept once the disk has filled up.
KEPT_RESERVE = 16384
# Backoff between tries of a transaction whose connection was lost.
RECONNECT_FIRST_DELAY = 0.05
RECONNECT_MAX_DELAY = 2.0


@dataclass(frozen=True)
class TickOptions:
    max_tasks: int | None = None
    max_seconds: float | None = None
    jobs: int = 1
    task: str | None = None
    dry_run: bool = False


@dataclass(frozen=True)
class TickError:
    """An error the tick survived (it went on with the other tasks), and the
    exit status it calls for: the error's own, or TICK_ERROR_STATUS."""

    message: str
    status: int


@dataclass
class TickReport:
    recovered: int = 0
    advanced: int = 0
    claimed: int = 0
    halted: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    errors: list[TickError] = field(default_factory=list)
    stopped_claiming: str | None = None
    host_fault: OrchestratorError | None = None  # the tick exits with its status

    @property
    def did_work(self) -> bool:
        return bool(self.recovered or self.advanced or self.claimed or self.halted)

    @property
    def exit_code(self) -> int:
        """0, or the status of the first error the tick survived."""
        return self.errors[0].status if self.errors else 0


@dataclass(frozen=True)
class Claim:
    """A claimed task, its attempt opened and committed: what running the
    attempt and recording it need, and nothing read again from the database."""

    task: repo.TaskSnapshot  # as it stands after the claim (running)
    pipeline: PipelineConfig
    stage: StageConfig
    attempt_id: int
    number: int
    token: str
    hint: str
    prev_outcome: str
    prev_score: str
    # An attempt of a round (`Slot`, the candidates feature): its slot,
    # 1..candidates, in the stage's round `round`; 0 for an attempt on its own.
    candidate: int = 0
    round: int | None = None
    candidates: int = 1

    @property
    def slot(self) -> Slot | None:
        """Its place in a round; None for an attempt on its own."""
        if self.round is None:
            return None
        return Slot(self.round, self.candidate, self.candidates)


@dataclass(frozen=True)
class Slot:
    """An attempt's place in a round of attempts run side by side and
    decided together (`TickHooks.open_attempt`, `slot_of`): which round of
    its task's stage, which of its `candidates` slots."""

    round: int
    candidate: int
    candidates: int

    def on(self, claim: Claim) -> Claim:
        """The claim, placed in this slot."""
        return replace(
            claim, round=self.round, candidate=self.candidate, candidates=self.candidates
        )


@dataclass(frozen=True)
class RoundEnd:
    """What closing one attempt of a round did (`TickHooks.decide_round`):
    the round's decision, once its last slot ended (None before), and the
    tail of the closed attempt's line in the log, and the state written
    (`landing` where the decision says `complete` in a pipeline that lands:
    what the line must say)."""

    decision: Decision | None
    tail: str
    state: State | None = None


@dataclass(frozen=True)
class ClaimSearch:
    """What a claim looks for (`TickHooks.claim_first`): the tasks it passes
    over, the one slug it is limited to, the new attempt's lease token, and
    the features' `refuse_claim`, which a feature's own claim asks too."""

    exclude: Collection[int]
    only: str | None
    token: str
    refused: Callable[[Connection, StageConfig, datetime], Refusal | None]


def attempt_columns(
    me: HostPort,
    task: repo.TaskSnapshot,
    stage: StageConfig,
    *,
    number: int,
    token: str,
    lease: Any,
    now: datetime,
    tick_id: int | None,
) -> dict[str, Any]:
    """The columns every claim's attempt row gets, the engine's or a
    feature's (`TickHooks.claim_first`, `open_attempt`): one list, so
    neither can open a row the other would not."""
    return {
        "task_id": task.id,
        "stage": task.stage,
        "run": task.run,
        "number": number,
        "hint": task.next_hint,
        "tick_id": tick_id,
        "lease_token": token,
        "lease_expires_at": lease,
        "host": me.host,
        "boot_id": me.identity,
        "tick_pid": me.pid,
        "tick_start": me.start_token,
        "started_at": now,
        "pool": stage.pool,
    }


@dataclass
class AttemptRun:
    """What running worker and verifier produced, before it is recorded."""

    outcome: Outcome
    verdict: Verdict | None = None
    error: str | None = None
    worker_exit: int | None = None
    verifier_exit: int | None = None
    fence_lost: bool = False
    workspace_hash: str | None = None  # the runaway guards' (`guards`)
    workspace_changed: bool | None = None
    backoff_seconds: float | None = None
    commit_sha: str | None = None  # the task branch's tip after a passed stage
    usage_limit: UsageLimit | None = None  # met by the attempt: pauses its pool (`features.pools`)


@dataclass(frozen=True, slots=True)
class Command:
    """A command about to start, as `TickHooks.wrap_command` sees it: which
    one (`name`: "setup", "worker", "verifier", "land_check", "calibrate"),
    what would run (`argv`, rendered) and as the config writes it
    (`template`, placeholders unfilled: nothing an agent wrote), where, with
    which environment, writing which state folder; the pipeline and stage
    whose config it runs under (the claim's stage for `setup`). `confined`
    says that config asks for the command to be wrapped (a sandbox): one no
    feature wraps is refused, never run as it is (`Registry.wrap_command`)."""

    name: str
    argv: tuple[str, ...]
    template: tuple[str, ...]
    cwd: Path
    env: Mapping[str, str]
    state_dir: Path
    pipeline: PipelineConfig | None
    stage: StageConfig | None
    confined: bool


@dataclass(frozen=True, slots=True)
class CommandRan:
    """How a command of an attempt went (`TickHooks.command_ended`): when it
    started and ended on the wall clock (nanoseconds since the epoch, what
    tracing tools take) and its exit status (None: it did not start, or a
    signal ended it)."""

    started_ns: int
    ended_ns: int
    exit_code: int | None


@dataclass(frozen=True)
class Refusal:
    """A feature's no to a claim (`TickHooks.refuse_claim`): why, for a
    person; the (pipeline, stage) pairs the same no covers, which the claim
    passes over for the rest of its search instead of asking task by task;
    and how the dry run words that passing over."""

    reason: str
    stages: tuple[tuple[str, str], ...] = ()
    passed_over: str = ""


class Cooldown:
    """The retry wait: tasks whose last attempt ended less than `seconds` ago
    are passed over by the claim, so a failing task does not spin."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._ended: dict[int, float] = {}  # task id -> when its last attempt ended

    def ended(self, task_id: int) -> None:
        self._ended[task_id] = time.monotonic()

    def waiting(self) -> set[int]:
        """The tasks still waiting (forgetting those that waited enough)."""
        now = time.monotonic()
        self._ended = {
            task_id: ended for task_id, ended in self._ended.items() if now - ended < self.seconds
        }
        return set(self._ended)


@dataclass(frozen=True)
class Chain:
    """`--jobs 1`: what the transaction recording an attempt needs to claim
    the next task too, saving a transaction (and its fsync) per attempt."""

    options: TickOptions
    claims: int  # claims made so far, this attempt's included
    started: float
    cooldown: Cooldown  # the tasks waiting out `retry_interval`
    # Made before the record's first try, so a retry finds the claim a lost
    # commit made (`Recorder._recorded_before`).
    token: str = field(default_factory=lambda: uuid.uuid4().hex)


# What an attempt leaves the loop: whether its task may be ready again, and
# the next claim when the recording transaction made one (`Chain`).
Ended = tuple[bool, Claim | None]

_T = TypeVar("_T")
