"""The landing's tests build the landing step alone, as the tick's jobs
are (`tick/tick_support.Bench`)."""

from __future__ import annotations

from tick.conftest import bench

__all__ = ["bench"]
