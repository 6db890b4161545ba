"""The only module of the orchestrator that starts processes.

It decides nothing about tasks: the tick renders a command, asks for a child
environment, runs it and reads back a `ProcessResult`. Decisions made here, and
why:

* **Every child gets its own session** (`start_new_session=True`) and every kill
  is `os.killpg`. Killing only the direct child leaves a grandchild that keeps
  running and holds the pipe; `communicate()` after `kill()` was measured to
  block until that grandchild exits. So timeouts, interrupts and the end of
  every run signal the whole group: SIGTERM, a grace period, then SIGKILL.
* **The group is signalled while its leader is still unreaped** where the OS
  lets us look without reaping (`os.waitid(..., WNOWAIT)`, Linux). A zombie
  leader keeps its pid, and so the group id, from being reused, so the final
  sweep can never hit a stranger's group. Without `waitid` (macOS on Python
  3.11/3.12) the leader is reaped first; the window is then microseconds wide
  and needs an empty group whose number is reused in it.
* **One selector loop** reads stdout and stderr, feeds stdin (non-blocking, in
  the same loop, so a child that never reads cannot deadlock us and a child
  that exits early only ends the feeding) and checks the deadline and
  `should_stop`. No threads and no signal handlers: the tick runs several
  attempts in threads and owns the process's signal disposition.
* **Output memory is bounded**: a head (a quarter of the cap) and a rolling tail
  (the rest, never under 64 KiB) per stream, plus byte counts. The verdict is
  printed last, so the tail is what matters; 50 MB of noise before it must not
  push it out or grow the tick.
* **The drain after exit is bounded** (about one second). A grandchild that
  escaped with `setsid` can hold the pipe for ever; we stop reading, sweep the
  group and close our ends, so a call ends within timeout + grace + ~2 s.
* **Spawn failures are results, not exceptions**: the caller decides whose
  fault one is (`program_cannot_start`: the tick holds a task whose command
  is missing or not executable, a fault of the configuration, not the task's).
* **Argv and environment values are cleaned and capped** (NUL removed, lone
  surrogates replaced, 8 KiB): they come from verdict hints and task fields,
  which the agent controls, and a NUL or a surrogate would make `Popen` raise.
  Placeholders are substituted in one regex pass over a fixed set, never with
  `str.format`, so a literal JSON argument survives and a value that contains
  `{task}` is not expanded again.
* **Orphans are killed only when provably ours**: same host, same boot, and the
  group leader's start time unchanged. A reused pid is never signalled.
"""

from __future__ import annotations

from orchestrator.runner.capture import ProcessResult
from orchestrator.runner.capture import program_cannot_start as program_cannot_start
from orchestrator.runner.command import run_command
from orchestrator.runner.environment import (
    MAX_VALUE_BYTES,
    PLACEHOLDERS,
    child_environment,
    render_argv,
)
from orchestrator.runner.groups import kill_process_group
from orchestrator.runner.identity import (
    ProcessIdentity,
    boot_id,
    host_name,
    pid_alive,
    process_start_time,
)
from orchestrator.runner.identity import pid_namespace as pid_namespace
from orchestrator.runner.orphans import PROCESS_TAG as PROCESS_TAG
from orchestrator.runner.orphans import kill_tagged as kill_tagged
from orchestrator.runner.orphans import process_tag as process_tag
from orchestrator.runner.orphans import tagged_processes as tagged_processes
from orchestrator.runner.reaper import adopt_orphans as adopt_orphans

__all__ = [
    "MAX_VALUE_BYTES",
    "PLACEHOLDERS",
    "ProcessIdentity",
    "ProcessResult",
    "boot_id",
    "child_environment",
    "host_name",
    "kill_process_group",
    "pid_alive",
    "process_start_time",
    "render_argv",
    "run_command",
]
