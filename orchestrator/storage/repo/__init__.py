"""The queries: verbs that say what the database does, on a caller's
transaction, returning frozen snapshots (never live ORM objects).

Every change of a task's state is `apply_transition`: a compare-and-set
UPDATE on the task's `version` checked by row count, plus the transition row
with `seq = version + 1`, in the caller's transaction. The unique
`(task_id, seq)` makes a second writer of the same step fail rather than
write it twice.

The statements of the tick's hot path are built once, at import, with bound
parameters, and run as `Prepared` statements (compiled once per dialect, run
on the driver cursor): SQLAlchemy's per-execution bookkeeping costs more than
SQLite takes to answer them, and a tick of 100 attempts runs ~1,100 of them.
"""

from __future__ import annotations

from orchestrator.storage.repo.attempt_rows import START_NO_COMMIT as START_NO_COMMIT
from orchestrator.storage.repo.attempt_rows import START_PENDING as START_PENDING
from orchestrator.storage.repo.attempt_rows import LastAttempt as LastAttempt
from orchestrator.storage.repo.attempt_rows import any_unfinished as any_unfinished
from orchestrator.storage.repo.attempt_rows import attempt_with_token as attempt_with_token
from orchestrator.storage.repo.attempt_rows import close_attempt as close_attempt
from orchestrator.storage.repo.attempt_rows import judged_commits as judged_commits
from orchestrator.storage.repo.attempt_rows import last_attempt as last_attempt
from orchestrator.storage.repo.attempt_rows import lease_expiry as lease_expiry
from orchestrator.storage.repo.attempt_rows import open_attempt as open_attempt
from orchestrator.storage.repo.attempt_rows import record_late_result as record_late_result
from orchestrator.storage.repo.attempt_rows import record_start_commit as record_start_commit
from orchestrator.storage.repo.attempt_rows import renew_lease as renew_lease
from orchestrator.storage.repo.attempt_rows import stage_start_commit as stage_start_commit
from orchestrator.storage.repo.attempt_rows import unfinished_attempts as unfinished_attempts
from orchestrator.storage.repo.claims import backoff_until as backoff_until
from orchestrator.storage.repo.claims import find_claimable as find_claimable
from orchestrator.storage.repo.claims import set_backoff as set_backoff
from orchestrator.storage.repo.history import attempts_of as attempts_of
from orchestrator.storage.repo.history import awaits_verdict as awaits_verdict
from orchestrator.storage.repo.history import context_rows as context_rows
from orchestrator.storage.repo.history import run_history as run_history
from orchestrator.storage.repo.records import _TASK_COLUMNS as _TASK_COLUMNS
from orchestrator.storage.repo.records import AttemptSnapshot as AttemptSnapshot
from orchestrator.storage.repo.records import ConflictError as ConflictError
from orchestrator.storage.repo.records import NewTask as NewTask
from orchestrator.storage.repo.records import TaskSnapshot as TaskSnapshot
from orchestrator.storage.repo.records import _task as _task
from orchestrator.storage.repo.records import attempts as attempts
from orchestrator.storage.repo.records import tasks as tasks
from orchestrator.storage.repo.records import ticks as ticks
from orchestrator.storage.repo.records import transitions as transitions
from orchestrator.storage.repo.task_rows import existing_slugs as existing_slugs
from orchestrator.storage.repo.task_rows import get_task as get_task
from orchestrator.storage.repo.task_rows import get_task_by_id as get_task_by_id
from orchestrator.storage.repo.task_rows import insert_tasks as insert_tasks
from orchestrator.storage.repo.task_rows import list_rows as list_rows
from orchestrator.storage.repo.task_rows import lock_task as lock_task
from orchestrator.storage.repo.task_rows import record_base_commit as record_base_commit
from orchestrator.storage.repo.task_rows import tasks_with_status as tasks_with_status
from orchestrator.storage.repo.tick_rows import DIED_STATUS as DIED_STATUS
from orchestrator.storage.repo.tick_rows import close_dead_tick as close_dead_tick
from orchestrator.storage.repo.tick_rows import close_tick as close_tick
from orchestrator.storage.repo.tick_rows import last_tick as last_tick
from orchestrator.storage.repo.tick_rows import note_idle_tick as note_idle_tick
from orchestrator.storage.repo.tick_rows import open_tick as open_tick
from orchestrator.storage.repo.tick_rows import open_tick_rows as open_tick_rows
from orchestrator.storage.repo.transition import _INSERT_TRANSITION as _INSERT_TRANSITION
from orchestrator.storage.repo.transition import actor_of as actor_of
from orchestrator.storage.repo.transition import apply_transition as apply_transition
from orchestrator.storage.repo.transition import last_event as last_event
from orchestrator.storage.repo.transition import last_reason as last_reason
from orchestrator.storage.repo.transition import transitions_of as transitions_of
from orchestrator.storage.repo.waits import family as family
from orchestrator.storage.repo.waits import link_tasks as link_tasks
from orchestrator.storage.repo.waits import waits_of as waits_of
