"""The spans of a tick: one per tick, one per attempt with its setup,
worker and verifier as children, made once the attempt is recorded (its
row says how it ended and what the agent reported), and one per landing
that ended in the tick (read from its transitions at the tick's end).

A task's run is one trace across ticks and hosts: its id is derived from
the task and run, and an attempt's span id from its row, so an attempt's
span links to its run's previous attempt without storing an id. Nothing
of the SDK is imported before the first span is made: an idle tick makes
none (cron's idle minutes would bury the traces worth reading), so it
costs two reads by primary key (where its landings would begin, and that
none did). Every failure here is said once on stderr and leaves
the tick as it was."""

from __future__ import annotations

import hashlib
import importlib
import secrets
import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from orchestrator.ext.hooks import TickHooks
from orchestrator.ext.model import Claim, Command, CommandRan, TickOptions, TickReport
from orchestrator.features.telemetry import genai
from orchestrator.features.telemetry.config import TelemetryConfig
from orchestrator.features.telemetry.store import (
    landings_after,
    recorded_attempt,
    transitions_mark,
)

if TYPE_CHECKING:
    from orchestrator.ext.ports import Kernel
    from orchestrator.features.telemetry.shipping import Tracing


def tick_hooks(kernel: Kernel, config: TelemetryConfig, url: str) -> TickHooks:
    spans = TickSpans(kernel, config, url)
    return TickHooks(
        tick_started=spans.tick_started,
        before_claims=spans.before_claims,
        command_ended=spans.command_ended,
        after_recorded=spans.after_recorded,
        tick_ended=spans.tick_ended,
    )


def run_trace(task_id: int, created_at: datetime, run: int) -> int:
    """The trace of a task's run: the same on every tick and host."""
    seed = f"{task_id}/{created_at.isoformat()}/{run}".encode()
    return int.from_bytes(hashlib.sha256(seed).digest()[:16], "big") or 1


def attempt_span(trace_id: int, attempt_id: int) -> int:
    """An attempt's span id, found again from its row by the next attempt."""
    seed = f"{trace_id:032x}/attempt/{attempt_id}".encode()
    return int.from_bytes(hashlib.sha256(seed).digest()[:8], "big") or 1


class TickSpans:
    """What one `Ticker` noted for its spans: the tick's start and ids, and
    each running attempt's commands until the attempt is recorded."""

    def __init__(self, kernel: Kernel, config: TelemetryConfig, url: str) -> None:
        self._kernel = kernel
        self._config = config
        self._url = url
        self._lock = threading.Lock()
        self._commands: dict[int, list[tuple[str, tuple[str, ...], CommandRan]]] = {}
        self._tracing: Tracing | None = None
        self._tick = (0, 0, 0)  # trace id, span id, start (ns)
        self._seen = (0, 0)  # the shipper's (dropped, full) when the last tick ended
        self._warned = False
        self._warming = False
        self._mark: int | None = None  # the newest transition before the landings

    def tick_started(self, options: TickOptions) -> None:
        self._tick = (secrets.randbits(128) or 1, secrets.randbits(64) or 1, time.time_ns())
        self._warned = False

    def before_claims(self, options: TickOptions) -> None:
        """Before any landing of the tick (registered first): where its
        landings' transitions will begin. One read of a primary key."""
        try:
            self._mark = transitions_mark(self._kernel.tx.engine)
        except Exception as exc:
            self._mark = None
            self._trouble(exc)

    def command_ended(self, claim: Claim, command: Command, ran: CommandRan) -> None:
        with self._lock:
            self._commands.setdefault(claim.attempt_id, []).append(
                (command.name, command.argv, ran)
            )
            warm, self._warming = not self._warming, True
        if warm:
            # The SDK's import (~0.1 s) while the attempt's next command
            # runs, not after it: the first span finds it loaded.
            threading.Thread(target=_warm, name="telemetry-import", daemon=True).start()

    def after_recorded(self, claim: Claim) -> None:
        with self._lock:
            commands = self._commands.pop(claim.attempt_id, [])
        try:
            self._attempt(claim, commands)
        except Exception as exc:  # telemetry never fails an attempt
            self._trouble(exc)

    def tick_ended(self, options: TickOptions, report: TickReport, status: int) -> None:
        try:
            mark, self._mark = self._mark, None
            landings = [] if mark is None else landings_after(self._kernel.tx.engine, mark)
            if self._tracing is None and not (report.did_work or landings or status):
                return  # an idle tick: nothing worth a span, nothing imported
            self._landings(landings)
            self._end_tick(report, status)
        except Exception as exc:
            self._trouble(exc)

    def _landings(self, landings: list[dict[str, Any]]) -> None:
        """A span per landing that ended in this tick, in its run's trace,
        after the attempt it landed."""
        for landing in landings:
            tracing = self._made()
            run = landing["run"] or 1
            trace_id = run_trace(landing["task_id"], landing["created_at"], run)
            links = [(self._tick[0], self._tick[1])]
            if landing["attempt_id"] is not None:
                links.append((trace_id, attempt_span(trace_id, landing["attempt_id"])))
            found: dict[str, genai.AttributeValue | None] = {
                "orchestrator.task": landing["slug"],
                "orchestrator.pipeline": landing["pipeline"],
                "orchestrator.stage": str(landing["from_state"]).rsplit(":", 1)[0],
                "orchestrator.run": run,
                "orchestrator.landing.outcome": landing["event"],
                "orchestrator.landing.reason": landing["reason"],
                "orchestrator.landing.commit": landing["landed_commit"],
                "orchestrator.landing.pr_url": landing["pr_url"],
            }
            ended = _ns(landing["at"])
            tracing.span(
                "landing",
                trace_id=trace_id,
                start_ns=min(ended, _ns(landing["began_at"] or landing["at"])),
                end_ns=ended,
                attributes={k: v for k, v in found.items() if v is not None},
                links=links,
                error=None if landing["event"] == "landed" else landing["event"],
            )

    def _end_tick(self, report: TickReport, status: int) -> None:
        tracing = self._made()
        trace_id, span_id, started = self._tick
        attributes: dict[str, genai.AttributeValue] = {
            "orchestrator.host": self._kernel.me.host,
            "orchestrator.tick.claimed": report.claimed,
            "orchestrator.tick.recovered": report.recovered,
            "orchestrator.tick.advanced": report.advanced,
            "orchestrator.tick.halted": report.halted,
            "process.exit.code": status,
        }
        for outcome, count in report.outcomes.items():
            attributes[f"orchestrator.tick.outcomes.{outcome}"] = count
        tracing.span(
            "tick",
            trace_id=trace_id,
            span_id=span_id,
            start_ns=started,
            end_ns=time.time_ns(),
            attributes=attributes,
            error=f"exit status {status}" if status else None,
        )
        tracing.shipper.settle(self._config.flush_seconds)
        now = (tracing.shipper.dropped, tracing.shipper.full)
        dropped, full = now[0] - self._seen[0], now[1] - self._seen[1]
        self._seen = now
        if dropped:
            why = "the collector failed or was too slow"
            if full:
                why += f"; {full} of them met a full queue"
            self._kernel.tick.warn(
                f"telemetry: {dropped} span(s) not exported to {self._url} ({why}); "
                "the tick is unaffected"
            )

    def _attempt(
        self, claim: Claim, commands: list[tuple[str, tuple[str, ...], CommandRan]]
    ) -> None:
        row, previous = recorded_attempt(
            self._kernel.tx.engine, claim.attempt_id, claim.task.id, claim.task.run
        )
        if row is None:
            return
        tracing = self._made()
        trace_id = run_trace(claim.task.id, claim.task.created_at, claim.task.run)
        span_id = attempt_span(trace_id, claim.attempt_id)
        links = [(self._tick[0], self._tick[1])] if self._tick[0] else []
        if previous is not None:
            links.append((trace_id, attempt_span(trace_id, previous)))
        worker = next((argv for name, argv, _ in commands if name == "worker"), ())
        agent = genai.agent_attributes(worker, claim.stage.output, row)
        attributes = genai.attempt_attributes(
            slug=claim.task.slug,
            pipeline=claim.pipeline.name,
            stage=claim.stage.name,
            number=claim.number,
            run=claim.task.run,
            row=row,
        )
        times = [ran for _, _, ran in commands]
        start = min([_ns(row["started_at"]), *(ran.started_ns for ran in times)])
        end = max([_ns(row["finished_at"] or row["started_at"]), *(ran.ended_ns for ran in times)])
        tracing.span(
            f"attempt {claim.stage.name}",
            trace_id=trace_id,
            span_id=span_id,
            start_ns=start,
            end_ns=end,
            attributes={**attributes, **agent},
            links=links,
            error=row["outcome"] if genai.failed(row["outcome"]) else None,
        )
        for name, _, ran in commands:
            mine: dict[str, genai.AttributeValue] = {"orchestrator.command": name}
            if ran.exit_code is not None:
                mine["process.exit.code"] = ran.exit_code
            tracing.span(
                name,
                trace_id=trace_id,
                parent_id=span_id,
                start_ns=ran.started_ns,
                end_ns=ran.ended_ns,
                attributes={**mine, **(agent if name == "worker" else {})},
                error=None if ran.exit_code is not None else "did not exit",
            )

    def _made(self) -> Tracing:
        if self._tracing is None:
            from orchestrator.features.telemetry.shipping import tracing

            self._tracing = tracing(self._url, self._config)
            # One provider per process (`orchestrator run`): count from here.
            self._seen = (self._tracing.shipper.dropped, self._tracing.shipper.full)
        return self._tracing

    def _trouble(self, exc: BaseException) -> None:
        if self._warned:
            return
        self._warned = True
        if isinstance(exc, ImportError):
            self._kernel.tick.warn(
                f"telemetry: cannot load the OpenTelemetry SDK ({exc}); is "
                "'orchestrator[telemetry]' installed? No span exported, the tick is unaffected"
            )
            return
        self._kernel.tick.warn(f"telemetry: {type(exc).__name__}: {exc}; the tick is unaffected")


def _warm() -> None:
    try:
        importlib.import_module("orchestrator.features.telemetry.shipping")
    except Exception:
        return  # said when the first span needs it


def _ns(when: datetime) -> int:
    return int(when.timestamp() * 1_000_000_000)
