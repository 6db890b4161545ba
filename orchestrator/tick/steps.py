"""How a command's end reads as an attempt's result, and the host's folders:
an OSError in state_root or workspace_root is the host's fault, not the task's."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from orchestrator import runner, safefs
from orchestrator.config import StageConfig
from orchestrator.domain.decide import Outcome
from orchestrator.errors import HostFault as HostFault  # noqa: PLC0414 (the tick's name for it)
from orchestrator.errors import host_error
from orchestrator.ext.model import AttemptRun
from orchestrator.tick.fence import FenceGuard


@contextmanager
def host_folder(key: str, root: Path) -> Iterator[None]:
    """Turn an OSError in `root` into a `HostFault` naming the folder. An
    error naming a file elsewhere (a missing prompt template) is not the
    folder's and goes on as it was; a failed write names no file at all."""
    try:
        yield
    except OSError as exc:
        named = exc.filename
        if isinstance(named, str | os.PathLike) and not Path(named).is_relative_to(root):
            raise
        raise HostFault(host_error(f"cannot write {key} {root}", exc)) from exc


def setup_state(marker: Path) -> str | None:
    """ "started" or "done" for a task whose setup ran, None for none."""
    try:
        state = json.loads(safefs.read_bytes(marker, 4096))["state"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return state if isinstance(state, str) else None


def write_setup_state(marker: Path, state: str, attempt: int) -> None:
    marker.parent.mkdir(parents=True, exist_ok=True)
    safefs.replace(marker, json.dumps({"state": state, "attempt": attempt}).encode())


def stopped_run(result: runner.ProcessResult, guard: FenceGuard, name: str) -> AttemptRun | None:
    if result.interrupted:
        if guard.fence_lost:
            return AttemptRun(
                Outcome.INTERRUPTED, error=f"{name} stopped: the task changed", fence_lost=True
            )
        return AttemptRun(Outcome.INTERRUPTED, error=f"{name} stopped: the tick was interrupted")
    if result.timed_out:
        return AttemptRun(Outcome.TIMEOUT, error=f"{name} timed out after {result.duration:.0f}s")
    return None


def accepted_exit(result: runner.ProcessResult, stage: StageConfig) -> bool:
    """A worker exit the stage lists in `worker_ok_exit`: on to the verifier."""
    return (
        result.start_error is None
        and result.signal is None
        and result.exit_code in stage.worker_ok_exit
    )


def no_verdict(source: str, result: runner.ProcessResult | None, state_dir: Path) -> str:
    """The cause beside the symptom: a judge that died (`can't open file`)
    says so on stderr, which would otherwise sit unread in `<source>.err`."""
    try:
        text = safefs.read_tail(state_dir / f"{source}.err", 4096).decode("utf-8", "replace")
    except OSError:
        text = ""
    tail = [line.strip() for line in text.splitlines() if line.strip()][-3:]
    ended = (
        f"{source} killed by signal {result.signal}"
        if result is not None and result.signal is not None
        else f"{source} exited {None if result is None else result.exit_code}"
    )
    error = f"no JSON verdict in the {source}'s output ({ended})"
    return error + (": " + " | ".join(tail) if tail else "")


def failure(name: str, result: runner.ProcessResult) -> str:
    if result.start_error is not None:
        return f"{name} could not start: {result.start_error}"
    if result.signal is not None:
        return f"{name} killed by signal {result.signal}"
    tail = result.stderr.strip().splitlines()[-1:] if result.stderr.strip() else []
    detail = f": {tail[0][:300]}" if tail else ""
    return f"{name} exited {result.exit_code}{detail}"
