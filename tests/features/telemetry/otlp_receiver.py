"""A real OTLP/HTTP receiver for the tests: an HTTP server on a free port
taking `POST /v1/traces` and decoding each body with `opentelemetry-proto`,
as a collector does; it keeps the spans it read, or answers 500 to all
when told to (a collector in trouble)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class Received:
    """A span as the collector read it."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    links: list[tuple[str, str]]
    start_ns: int
    end_ns: int
    status: int


@dataclass
class Receiver:
    url: str
    failing: bool = False
    # Set: the receiver holds each request until it is cleared (a collector
    # too slow to answer).
    stalled: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    spans: list[Received] = field(default_factory=list)
    requests: int = 0
    answered: int = 0  # requests that got their answer
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_for(self, count: int, timeout: float = 60.0) -> list[Received]:
        """The spans once `count` arrived (a deadline, not a sleep)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.spans) >= count:
                    return list(self.spans)
            time.sleep(0.02)
        raise AssertionError(f"{len(self.spans)} spans arrived, {count} expected")


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    receiver = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with receiver.lock:
                receiver.requests += 1
                failing = receiver.failing
            if receiver.stalled.is_set():
                receiver.released.wait(60)
            if failing or self.path != "/v1/traces":
                self.send_response(500 if failing else 404)
                self.end_headers()
                return
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            read = [
                Received(
                    name=span.name,
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_id=span.parent_span_id.hex(),
                    attributes={a.key: _value(a.value) for a in span.attributes},
                    links=[(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
                    start_ns=span.start_time_unix_nano,
                    end_ns=span.end_time_unix_nano,
                    status=span.status.code,
                )
                for resource in request.resource_spans
                for scope in resource.scope_spans
                for span in scope.spans
            ]
            with receiver.lock:
                receiver.spans.extend(read)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
            with receiver.lock:
                receiver.answered += 1

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.released.set()
        server.shutdown()
        server.server_close()


def closed_port() -> str:
    """The URL of a port nobody listens on: a collector that is down."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
