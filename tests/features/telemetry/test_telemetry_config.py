"""`[telemetry]` as the loader reads it, and which URL the spans go to:
the file's key first, the standard OpenTelemetry variables otherwise,
nothing (telemetry off) with neither."""

from __future__ import annotations

import pytest
from e2e.e2e_support import stage
from support import Project

from orchestrator.config import load_settings
from orchestrator.errors import ConfigError
from orchestrator.features.telemetry.config import TelemetryConfig, telemetry_of, traces_url

WORK = stage("work", worker=["true"])


def test_the_table_is_read_into_the_features_config(project: Project) -> None:
    project.config.write_text(
        '[telemetry]\notlp_endpoint = "http://collector:4318/"\n'
        "queue_size = 64\nflush_seconds = 0.5\n\n" + WORK
    )
    config = telemetry_of(load_settings(config=project.config, environ={}))
    assert config == TelemetryConfig("http://collector:4318/", "orchestrator", 64, 0.5, 5.0)
    assert traces_url(config, {}) == "http://collector:4318/v1/traces"


def test_a_bad_endpoint_or_key_is_a_config_error(project: Project) -> None:
    project.config.write_text('[telemetry]\notlp_endpoint = "collector:4318"\n\n' + WORK)
    with pytest.raises(ConfigError, match=r"telemetry\.otlp_endpoint: an http:// or https:// URL"):
        load_settings(config=project.config, environ={})
    project.config.write_text("[telemetry]\nqueue_sise = 3\n\n" + WORK)
    with pytest.raises(ConfigError, match="queue_sise"):
        load_settings(config=project.config, environ={})


@pytest.mark.parametrize(
    ("key", "environ", "url"),
    [
        (None, {}, None),
        (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "http://c:4318/v1/traces"),
        (None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:9/t"}, "http://c:9/t"),
        (
            "http://mine:4318",
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"},
            "http://mine:4318/v1/traces",
        ),
    ],
)
def test_where_the_spans_go(key: str | None, environ: dict[str, str], url: str | None) -> None:
    assert traces_url(TelemetryConfig(otlp_endpoint=key), environ) == url
