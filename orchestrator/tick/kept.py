"""Kept results: an attempt's result its tick could not record (the database
stayed away, the disk filled up), sealed beside the attempt for the tick that
recovers it, and the space reserved for it when the attempt starts."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

from orchestrator import safefs
from orchestrator.domain.decide import Outcome
from orchestrator.domain.slug import slug_problem
from orchestrator.domain.verdict import Verdict
from orchestrator.errors import OrchestratorError
from orchestrator.ext.model import KEPT_RESERVE, KEPT_RESULT, AttemptRun, Claim

# A kept result is a verdict and a few fields; a bigger file is not one.
_KEPT_READ = 16 << 20


def keep_result(folder: Path, claim: Claim, run: AttemptRun, *, database: bool) -> None:
    """The record failed past its retries (the database stayed away, the
    disk is full): keep the result beside the attempt, sealed, where the
    tick that recovers it finds it and records it (`Recovery._record_kept`).
    Best effort, into the space `reserve_kept` set aside if it fits."""
    if slug_problem(claim.task.slug) is not None:
        return  # never a path from a bad slug
    kept = {
        "outcome": run.outcome.value,
        "pass": None if run.verdict is None else run.verdict.passed,
        "score": None if run.verdict is None else run.verdict.score,
        "reasons": None if run.verdict is None else list(run.verdict.reasons),
        "next_hint": None if run.verdict is None else run.verdict.next_hint,
        "error": run.error,
        "worker_exit": run.worker_exit,
        "verifier_exit": run.verifier_exit,
        # The fence its record would have had; the next tick records it
        # only if the task is still there.
        "version": claim.task.version,
        # Whether the database (not a bug of ours) failed the record.
        "database": database,
    }
    kept["seal"] = seal(claim.token, kept)
    path = folder / KEPT_RESULT
    body = json.dumps(kept, sort_keys=True).encode()
    with contextlib.suppress(OSError, ValueError):
        if len(body) <= KEPT_RESERVE and path.lstat().st_size == KEPT_RESERVE:
            # Into the space reserved at the start: needs no free block.
            # Not through a link or a hard link the worker put there.
            safefs.write_into(path, body.ljust(KEPT_RESERVE))
            return
    with contextlib.suppress(OSError, ValueError):
        safefs.replace(path, body)


def reserve_kept(folder: Path, claim: Claim) -> None:
    """Reserve `KEPT_RESULT`'s space while there is some: a disk that
    fills up during the attempt fails its record (SQLite) and would
    fail keeping its result too, and the next tick would count a crash.
    Best effort: a folder that cannot be made fails the attempt anyway.

    The folder is made here, and made fresh: one already there is not ours
    (every attempt has a number of its own) and whatever it holds, links to
    files outside among them, would be written through. `safefs.FolderExists`
    then, which the attempt records as counting toward nothing."""
    if slug_problem(claim.task.slug) is not None:
        return  # never a path from a bad slug (`AttemptRunner._execute` refuses it)
    try:
        safefs.fresh_folder(folder)
    except (safefs.FolderExists, safefs.NotRegularFile):
        raise  # the task's folder a link: making ours would follow it out
    except OSError:
        return
    with contextlib.suppress(OSError):
        safefs.write_new(folder / KEPT_RESULT, b" " * KEPT_RESERVE)


def seal(token: str, kept: dict[str, Any]) -> str:
    """A kept result's MAC under the attempt's lease token, which no worker
    sees (they get a hash of it): a worker writing `result.json` into its
    state folder cannot pass it off as its tick's."""
    body = json.dumps(kept, sort_keys=True).encode()
    return hmac.new(token.encode(), body, hashlib.sha256).hexdigest()


def database_fault(exc: BaseException) -> bool:
    """Whether an error out of a record is the database's (busy, out of
    reach, full, read-only: the statuses `storage.driver_errors.translate` gives),
    rather than a fault of ours."""
    return isinstance(exc, OrchestratorError) and exc.exit_code in (69, 74, 77)


def kept_run(kept: dict[str, Any]) -> AttemptRun:
    """The `AttemptRun` a kept result (`keep_result`) stands for."""
    verdict = None
    if kept.get("pass") is not None and kept.get("score") is not None:
        verdict = Verdict(
            passed=bool(kept["pass"]),
            score=float(kept["score"]),
            reasons=tuple(str(r) for r in kept.get("reasons") or ()),
            next_hint=str(kept.get("next_hint") or ""),
        )
    return AttemptRun(
        Outcome(kept["outcome"]),
        verdict=verdict,
        error=kept.get("error"),
        worker_exit=kept.get("worker_exit"),
        verifier_exit=kept.get("verifier_exit"),
    )


def read_kept(folder: Path, token: str) -> dict[str, Any] | None:
    """The result a tick kept in `folder` (`keep_result`), if its seal
    matches the attempt's lease token."""
    try:
        kept = json.loads(safefs.read_bytes(folder / KEPT_RESULT, _KEPT_READ))
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict):
        return None
    mac = kept.pop("seal", None)
    if not isinstance(mac, str) or not hmac.compare_digest(mac, seal(token, kept)):
        return None  # not written by the attempt's tick (a worker can write there)
    return kept


def forget_kept(folder: Path) -> None:
    """Recorded (or never needed): nothing is kept any more."""
    with contextlib.suppress(OSError):
        (folder / KEPT_RESULT).unlink()
