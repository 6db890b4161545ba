"""`report --html`: the served pages, rendered once into a single file.

Links become in-page anchors, the stylesheet is inlined, and a CSP meta tag
forbids scripts and network loads, so the file is safe to mail around. It is
read-only: it carries no forms.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine

from orchestrator.config import Settings
from orchestrator.storage.db import read_tx
from orchestrator.storage.reads.tasks import recent_slugs
from orchestrator.web.pages import Pages
from orchestrator.web.render import Links, css

LINKS = Links(report=True)


def render_report(engine: Engine, settings: Settings, limit: int, slugs: list[str]) -> str:
    pages = Pages(engine, settings)
    chosen = slugs or _recent(engine, limit)
    items: list[dict[str, Any]] = []
    for slug in chosen:
        page, stages = pages.task_context(slug)
        gate = pages.gate_view(slug) if page.task.status.value == "awaiting_approval" else None
        items.append({"page": page, "stages": stages, "gate": gate})
    from orchestrator.web import data

    return pages.render(
        "report.html",
        LINKS,
        board=data.board(engine, pages.page_size),
        tasks=items,
        history=data.history_page(engine),
        filters={},
        events=(),
        taken=datetime.now(UTC),
        inline_css=css(),
        page_title="orchestrator report",
        csrf=None,
    )


def _recent(engine: Engine, limit: int) -> list[str]:
    """Gates first (oldest waiting first), then the most recently changed."""
    with read_tx(engine) as conn:
        return recent_slugs(conn, limit)
