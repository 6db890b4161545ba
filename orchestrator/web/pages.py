"""Each page as a function from the database to HTML, shared by `serve` and
`report --html` so the report is exactly the pages people see."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jinja2 import Environment
from markupsafe import Markup
from sqlalchemy import Engine

from orchestrator.config import Settings
from orchestrator.domain.pipeline import RECORDED_EVENTS, reject_choices
from orchestrator.views.gate import GateView, gate_view
from orchestrator.web import data
from orchestrator.web.render import Links, environment
from orchestrator.web.svg import Point, score_curve


@dataclass
class StageView:
    name: str
    attempts: list[Any]
    svg: Markup
    # The task's run counter goes up at every stage change; people count a
    # stage's runs: its first run is 1, whatever ran before it.
    runs: dict[int, int]


class Pages:
    def __init__(self, engine: Engine, settings: Settings, page_size: int = 100) -> None:
        self.engine = engine
        self.settings = settings
        self.page_size = page_size
        self.env: Environment = environment()

    def render(self, template: str, links: Links, **context: Any) -> str:
        return self.env.get_template(template).render(links=links, **context)

    def board(
        self, links: Links, only: str | None = None, cursor: str | None = None, **extra: Any
    ) -> str:
        board = data.board(self.engine, self.page_size, only, cursor)
        return self.render("board.html", links, board=board, page_title="Board", **extra)

    def task_context(self, slug: str) -> tuple[data.TaskPage, list[StageView]]:
        page = data.task_page(self.engine, slug)
        pipeline = self.settings.pipeline(page.task.pipeline)
        order = {name: i for i, name in enumerate(pipeline.stage_names if pipeline else ())}
        # Pipeline order; a stage the config lost goes last, in the order it ran.
        curves = sorted(page.stages, key=lambda c: order.get(c.stage, len(order)))
        return page, [self._stage(page, curve) for curve in curves]

    def _stage(self, page: data.TaskPage, curve: data.StageCurve) -> StageView:
        pipeline = self.settings.pipeline(page.task.pipeline)
        config = pipeline.stage(curve.stage) if pipeline else None
        runs: dict[int, int] = {}
        for a in curve.attempts:
            runs.setdefault(a.run, len(runs) + 1)
        points = [
            Point(
                a.number,
                a.score,
                bool(a.passed),
                runs[a.run],
                a.outcome or "",
                best=a.id in page.marks.best,
                restored=a.id in page.marks.restored,
            )
            for a in curve.attempts
            # A running attempt has nothing to show yet; a pending verdict's
            # recheck judged nothing (a CI wait makes many of them).
            if a.outcome not in (None, "pending")
        ]
        # Only the current run's plateau window matters, and only at the task's stage.
        here = curve.stage == page.task.stage
        current = runs.get(page.task.run) if here else None
        reason = page.task.halt_reason if here and page.task.halt_reason else curve.halt_reason
        svg = score_curve(
            points,
            pass_score=config.pass_score if config else None,
            patience=config.plateau.patience if config else None,
            current_run=current,
            halted_at=curve.halted_at,
            halt_reason=reason,
            title=f"{page.task.slug} {curve.stage} scores",
        )
        return StageView(curve.stage, curve.attempts, Markup(svg), runs)  # noqa: S704 - escaped

    def task(self, links: Links, slug: str, **extra: Any) -> str:
        page, stages = self.task_context(slug)
        return self.render("task.html", links, page=page, stages=stages, page_title=slug, **extra)

    def gate_view(self, slug: str) -> GateView:
        return gate_view(self.engine, self.settings, slug)

    def gate(self, links: Links, slug: str, **extra: Any) -> tuple[str, int]:
        """The gate page and its status: 409 with a pointer to the task page
        when the task waits at no gate (no hash to approve, no files read)."""
        task = data.task_row(self.engine, slug)
        if task.status.value != "awaiting_approval":
            html = self.render("not_at_gate.html", links, task=task, page_title=slug, **extra)
            return html, 409
        view = self.gate_view(slug)
        pipeline = self.settings.pipeline(view.task.pipeline)
        choices = reject_choices(view.task.stage, pipeline.stage_names if pipeline else ())
        html = self.render(
            "gate.html", links, gate=view, reject_to=choices, page_title=f"gate {slug}", **extra
        )
        return html, 200

    def history(self, links: Links, filters: dict[str, str], page: int = 1, **extra: Any) -> str:
        rows = data.history_page(self.engine, page=page, **filters)
        return self.render(
            "history.html",
            links,
            history=rows,
            filters=filters,
            events=RECORDED_EVENTS,
            page_title="History",
            **extra,
        )
