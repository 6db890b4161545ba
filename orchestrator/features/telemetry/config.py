"""Where the traces go and how much may wait for the exporter.

`[telemetry] otlp_endpoint` names the collector's OTLP/HTTP base URL (the
standard `OTEL_EXPORTER_OTLP_ENDPOINT` does when the file says nothing,
and `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as the full traces URL), so a
host already set up for OpenTelemetry needs no key of ours. No SDK here:
this module is read by every tick."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.config.schema import Checks, Integer, Key, Number, Section, Text, read_keys

if TYPE_CHECKING:
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
    the file has none (or the Settings were made without the loader)."""
    found = TELEMETRY_SECTION.table_of(settings)
    return found if isinstance(found, TelemetryConfig) else TelemetryConfig()


def read_telemetry(checks: Checks, value: object) -> TelemetryConfig:
    if value is None:
        return TelemetryConfig()
    table = checks.table(value, _TABLE, TELEMETRY_SECTION.names())
    values = TELEMETRY_SECTION.defaults()
    read_keys(checks, TELEMETRY_SECTION.keys, table, _TABLE, values)
    endpoint = values["otlp_endpoint"]
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        checks.fail(f"{_TABLE}.otlp_endpoint", f"an http:// or https:// URL, not {endpoint!r}")
    return TelemetryConfig(**values)


_TABLE = "telemetry"
_IN_TABLE = frozenset({_TABLE})
TELEMETRY_SECTION: Section[None] = Section(
    name=_TABLE,
    table=_TABLE,
    table_doc="`[telemetry]`: OpenTelemetry traces of ticks and attempts (`how-to/telemetry.md`)",
    keys=(
        Key(
            "otlp_endpoint",
            Text(),
            None,
            "the collector's OTLP/HTTP base URL (`/v1/traces` is added); unset: the "
            "environment's `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`), and "
            "with neither no trace is made",
            _IN_TABLE,
            shown="(the environment's)",
        ),
        Key(
            "service_name",
            Text(),
            "orchestrator",
            "the `service.name` of the spans' resource",
            _IN_TABLE,
        ),
        Key(
            "queue_size",
            Integer(1),
            2048,
            "spans waiting for the exporter, at most; one more is dropped and counted",
            _IN_TABLE,
        ),
        Key(
            "flush_seconds",
            Number(low=0.0),
            2.0,
            "seconds a tick's end waits, at most, for its spans to leave (none once the "
            "collector failed)",
            _IN_TABLE,
        ),
        Key(
            "export_timeout",
            Number(low=0.0, low_inclusive=False),
            5.0,
            "seconds one export request may take, its retries included",
            _IN_TABLE,
        ),
    ),
    read_table=read_telemetry,
    extension=True,
)


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
