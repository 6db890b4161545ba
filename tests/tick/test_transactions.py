"""The tick's transactions alone: lines said only once committed, a tick row
made by a write that rolled back forgotten, the row closed with the tick's
counts, and a transaction whose connection was lost tried again (knowing it
is a retry) within the bound, then the database declared down."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from e2e.e2e_support import PASS, stage
from support import Project
from tick.tick_support import Bench

from orchestrator.errors import ConnectionLostError
from orchestrator.storage.db import db_now


def test_lines_are_said_once_committed_never_on_a_rollback(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = bench(stage("only", worker=["true"], verifier=PASS))
    with pytest.raises(RuntimeError), b.tx.write() as conn:
        b.tx.ensure_tick(conn, db_now(conn))
        b.tx.say_after_commit("rolled back")
        raise RuntimeError("boom")
    assert b.said == []
    assert b.tick.tick_id is None  # its row went with the rollback: made again next time
    with b.tx.write() as conn:
        b.tx.ensure_tick(conn, db_now(conn))
        b.tx.say_after_commit("committed")
        assert b.said == []
    assert b.said == ["committed"]
    assert b.tick.tick_id is not None
    b.tick.report.claimed = 3
    b.tx.close_tick(exit_code=0)
    [(claimed, exit_code, ended)] = project.query(
        "SELECT claimed, exit_code, finished_at FROM ticks"
    )
    assert (claimed, exit_code) == (3, 0)
    assert ended is not None


def test_idle_ticks_share_one_row_and_a_failed_one_writes_none(
    bench: Callable[..., Bench], project: Project
) -> None:
    stages = stage("only", worker=["true"], verifier=PASS)
    bench(stages).tx.close_tick(exit_code=75)  # failed: the database is left alone
    assert project.query("SELECT count(*) FROM ticks") == [(0,)]
    for _ in range(3):
        bench().tx.close_tick(exit_code=0)
    [(claimed, exit_code)] = project.query("SELECT claimed, exit_code FROM ticks")
    assert (claimed, exit_code) == (0, 0)  # one idle row, moved forward


def test_a_lost_connection_is_retried_as_a_retry(
    bench: Callable[..., Bench], project: Project
) -> None:
    b = bench(stage("only", worker=["true"], verifier=PASS))
    tries: list[bool] = []

    def flaky(again: bool) -> str:
        tries.append(again)
        if len(tries) < 3:
            raise ConnectionLostError("server closed the connection")
        return "done"

    assert b.tx.retrying(flaky) == "done"
    assert tries == [False, True, True]
    assert not b.tick.db_down.is_set()


def test_past_the_bound_the_database_is_down(bench: Callable[..., Bench], project: Project) -> None:
    b = bench(stage("only", worker=["true"], verifier=PASS), reconnect_seconds=0.3)
    assert b.tx.reconnect_bound() == 0.3

    def lost(_again: bool) -> None:
        raise ConnectionLostError("no route to host")

    with pytest.raises(ConnectionLostError):
        b.tx.retrying(lost)
    assert b.tick.db_down.is_set()
    assert isinstance(b.tick.report.host_fault, ConnectionLostError)
    assert b.tick.report.stopped_claiming == "no route to host"
