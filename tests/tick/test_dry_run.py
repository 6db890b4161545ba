"""The dry run alone: what a tick would do now (recover, move a gate on,
run, halt), read through the claim's own query, writing nothing."""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Callable

from e2e.e2e_support import PASS, stage
from support import Project
from tick.tick_support import Bench

from orchestrator.ext.model import TickOptions
from orchestrator.tick.dry_run import DryRun
from orchestrator.tick.host import HostIdentity
from orchestrator.tick.recovery import Recovery


def _dry_run(b: Bench) -> DryRun:
    recovery = Recovery(b.settings, b.tx, b.tick, b.me, b.recorder(), b.applier())
    return DryRun(b.settings, b.engine, b.tick, b.me, recovery)


def test_it_says_what_a_tick_would_do_and_writes_nothing(
    bench: Callable[..., Bench], project: Project
) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = dataclasses.replace(HostIdentity.here(), pid=gone.pid, start_token="gone")
    holder = bench(stage("only", worker=["true"], verifier=PASS), me=dead)
    holder.add("t1", "t2", "t3")
    holder.claim("t1")  # its tick died
    before = project.counts()
    b = bench()
    _dry_run(b).show(TickOptions(max_tasks=1))
    assert b.said == [
        "would recover attempt 1 (only): tick process is gone",
        "t2: would run only attempt 1: worker ['true']; verifier " + repr(PASS),
    ]
    assert project.counts() == before
    assert project.state("t1") == "only:running"
    assert b.tick.tick_id is None
