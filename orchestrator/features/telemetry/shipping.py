"""The SDK's side: one tracer provider per process and collector, whose
spans go through a bounded queue to the official OTLP/HTTP exporter on a
thread of their own, so export never slows or fails a tick.

A full queue drops the span and counts it; an export that fails (the
collector down, answering 500) drops its batch and counts it. A tick's
end waits for the queue to empty at most `flush_seconds`, and not at all
once a request failed: the requests session the exporter is handed says
so at once, before the exporter's own retries and their waits."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import requests
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags

from orchestrator.features.telemetry.config import TelemetryConfig
from orchestrator.features.telemetry.genai import AttributeValue

BATCH = 256


class Shipper:
    """The bounded hand-off between the tick's threads and the exporter."""

    def __init__(self, exporter: SpanExporter, size: int) -> None:
        self._exporter = exporter
        self._queue: queue.Queue[ReadableSpan] = queue.Queue(maxsize=max(1, size))
        self._changed = threading.Condition()
        self._in_flight = 0
        self.failing = threading.Event()
        self.dropped = 0  # every span that did not leave, the full queue's included
        self.full = 0  # of those, the spans a full queue refused
        self.exported = 0
        threading.Thread(target=self._loop, name="telemetry-export", daemon=True).start()

    def offer(self, span: ReadableSpan) -> None:
        try:
            self._queue.put_nowait(span)
        except queue.Full:
            with self._changed:
                self.dropped += 1
                self.full += 1

    def failed(self) -> None:
        """The collector refused or could not be reached (the session says so)."""
        with self._changed:
            self.failing.set()
            self._changed.notify_all()

    def settle(self, seconds: float) -> None:
        """Wait for the spans to leave, at most `seconds`, not at all once
        the collector failed; what is left then is dropped and counted."""
        deadline = time.monotonic() + seconds
        with self._changed:
            while (self._queue.qsize() or self._in_flight) and not self.failing.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            while True:
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    break
                self.dropped += 1
            # The batch on its way out dies with the process: counted now,
            # and not again should it fail later.
            self.dropped += self._in_flight
            self._in_flight = 0

    def _loop(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            with self._changed:
                self._in_flight = len(batch)
            try:
                ok = self._exporter.export(batch) is SpanExportResult.SUCCESS
            except Exception:  # the exporter's trouble is never the tick's
                ok = False
            with self._changed:
                if ok:
                    self.exported += len(batch)
                    self.failing.clear()
                else:
                    self.dropped += self._in_flight
                    self.failing.set()
                self._in_flight = 0
                self._changed.notify_all()


class _Handoff(SpanProcessor):
    def __init__(self, shipper: Shipper) -> None:
        self._shipper = shipper

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        self._shipper.offer(span)

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class _Watched(requests.Session):
    """The exporter's session, telling the shipper of a failure the moment
    it happens (the exporter would retry with waits first)."""

    def __init__(self, shipper: list[Shipper]) -> None:
        super().__init__()
        self._shipper = shipper

    def request(self, *args: Any, **kwargs: Any) -> requests.Response:
        try:
            response = super().request(*args, **kwargs)
        except Exception:
            self._tell()
            raise
        if response.status_code >= 400:
            self._tell()
        return response

    def _tell(self) -> None:
        for shipper in self._shipper:
            shipper.failed()


class _Chosen(IdGenerator):
    """Ids the caller chose (a task run's trace, an attempt's span, which
    a later tick links to without storing them), else random ones."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()
        self.trace_id: int | None = None
        self.span_id: int | None = None

    def generate_trace_id(self) -> int:
        chosen, self.trace_id = self.trace_id, None
        return chosen or self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        chosen, self.span_id = self.span_id, None
        return chosen or self._random.generate_span_id()


class Tracing:
    """The process's provider for one collector: spans made after the fact
    (their times given), with the ids chosen, handed to the `Shipper`."""

    def __init__(self, url: str, config: TelemetryConfig) -> None:
        self._ids = _Chosen()
        self._lock = threading.Lock()  # the chosen ids, until the span took them
        provider = TracerProvider(
            resource=Resource.create({"service.name": config.service_name}),
            id_generator=self._ids,
            shutdown_on_exit=False,
        )
        told: list[Shipper] = []
        exporter = OTLPSpanExporter(
            endpoint=url, timeout=config.export_timeout, session=_Watched(told)
        )
        self.shipper = Shipper(exporter, config.queue_size)
        told.append(self.shipper)
        provider.add_span_processor(_Handoff(self.shipper))
        self._tracer = provider.get_tracer("orchestrator")

    def span(
        self,
        name: str,
        *,
        trace_id: int,
        span_id: int | None = None,
        parent_id: int | None = None,
        start_ns: int,
        end_ns: int,
        attributes: Mapping[str, AttributeValue],
        links: Sequence[tuple[int, int]] = (),
        error: str | None = None,
    ) -> None:
        """One span of trace `trace_id`, ended: its id `span_id` (random
        when None), under the span `parent_id` (a root when None), after
        the spans `links` names by (trace, span) ids."""
        context = None
        if parent_id is not None:
            context = trace.set_span_in_context(NonRecordingSpan(_context(trace_id, parent_id)))
        linked = [Link(_context(t, s)) for t, s in links]
        with self._lock:
            self._ids.trace_id, self._ids.span_id = trace_id, span_id
            made = self._tracer.start_span(
                name,
                context=context,
                attributes=dict(attributes),
                links=linked,
                start_time=start_ns,
            )
            self._ids.trace_id = self._ids.span_id = None
        if error is not None:
            made.set_status(Status(StatusCode.ERROR, error))
        made.end(end_time=max(start_ns, end_ns))


def _context(trace_id: int, span_id: int) -> SpanContext:
    return SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
    )


_TRACINGS: dict[str, Tracing] = {}
_MADE = threading.Lock()


def tracing(url: str, config: TelemetryConfig) -> Tracing:
    """The one `Tracing` of this process for `url` (`orchestrator run`
    ticks again and again: one provider and one export thread for all)."""
    with _MADE:
        found = _TRACINGS.get(url)
        if found is None:
            found = _TRACINGS[url] = Tracing(url, config)
        return found
