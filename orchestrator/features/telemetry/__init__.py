"""Telemetry: OpenTelemetry traces of ticks and attempts, exported over
OTLP/HTTP to whatever the operators already run (Tempo, Jaeger,
Honeycomb, Langfuse). Where the traces go (`config.py`), what a span
says (`genai.py`: the GenAI semantic conventions and ours), the spans of a
tick (`spans.py`, reached by the engine only through `TickHooks`), the
SDK's provider and the bounded hand-off to the exporter (`shipping.py`).

Registering it costs its keys (`config.py`, standard library only) and
one look at the environment per `Ticker`: with no
endpoint configured its factory returns no hook and nothing of the SDK is
imported; with one, the SDK is imported only once a span is worth making
(an idle tick makes none)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from orchestrator.ext.hooks import Feature, TickHooks
from orchestrator.features.telemetry.config import TELEMETRY_SECTION

if TYPE_CHECKING:
    from orchestrator.ext.ports import Kernel


def _tick(kernel: Kernel) -> TickHooks:
    from orchestrator.features.telemetry.config import telemetry_of, traces_url

    config = telemetry_of(kernel.settings)
    url = traces_url(config, os.environ)
    if url is None:
        return TickHooks()
    from orchestrator.features.telemetry.spans import tick_hooks

    return tick_hooks(kernel, config, url)


FEATURE = Feature(name="telemetry", config=(TELEMETRY_SECTION,), tick=_tick)
