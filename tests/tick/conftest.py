"""Fixtures for the tick's jobs, each built alone (`tick_support.Bench`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support import Project
from tick.tick_support import Bench, make_bench

from orchestrator.tick.host import HostIdentity


@pytest.fixture
def bench(project: Project) -> Iterator[Callable[..., Bench]]:
    """`bench(stages, **orchestrator)`: write that config, then a `Bench` on it."""
    made: list[Bench] = []

    def make(stages: str | None = None, me: HostIdentity | None = None, **keys: Any) -> Bench:
        if stages is not None:
            project.write_config(stages, **keys)
        made.append(make_bench(project, me))
        return made[-1]

    yield make
    for one in made:
        one.engine.dispose()
