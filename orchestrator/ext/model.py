"""The vocabulary the engine and its features share: a tick's options and
report, a claim, what an attempt produced before it is recorded, the retry
wait, and the constants the tick's jobs share. Here, below both, so that a
feature speaks it without importing `tick/`."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from orchestrator.agents.limits import UsageLimit
from orchestrator.config import PipelineConfig, StageConfig
from orchestrator.domain.decide import Outcome
from orchestrator.domain.verdict import Verdict
from orchestrator.errors import OrchestratorError
from orchestrator.storage import repo

ACTOR = "tick"
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
    # Best of N (`tick.rounds`): the candidate's slot, 1..candidates, in
    # the stage's round `round`; 0 for an attempt on its own.
    candidate: int = 0
    round: int | None = None
    candidates: int = 1


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
