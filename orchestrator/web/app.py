"""The Starlette application: routes, each a thin call into `Pages` or `actions`.

GET handlers are plain functions (Starlette runs them in its thread pool, as
our database calls block); the POST handlers read the form, check the CSRF
token first, and run the same `orchestrator.api.actions` the CLI runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib import resources
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from orchestrator.api import actions
from orchestrator.api.approving import approve_gate
from orchestrator.config import Settings
from orchestrator.errors import OrchestratorError, RefusedError, UnknownTaskError
from orchestrator.storage.db import read_tx
from orchestrator.storage.reads.health import ping
from orchestrator.web.data import SECTION_ORDER
from orchestrator.web.pages import Pages
from orchestrator.web.render import Links, css
from orchestrator.web.security import Auth, Guard, csrf_ok
from orchestrator.web.task_actions import task_routes

LINKS = Links()
FLASHES = {
    "approved": "Approved: the next tick moves the task to its next stage.",
    "rejected": "Rejected: the stage you chose runs again with your note as its hint.",
    "halted": "Halted: a running attempt stops within seconds; Resume makes it ready again.",
    "resumed": "Resumed: the next tick runs it again at its stage.",
    "cancelled": "Cancelled: the task is finished for good.",
}
# A reject without a note, in the page's words (the library's names `--note`).
NOTE_NEEDED = "Write a note saying what to change before Reject: it is the next attempt's hint."
MAX_PAGE = 1_000_000


def create_app(engine: Engine, settings: Settings, auth: Auth, page_size: int = 100) -> Guard:
    pages = Pages(engine, settings, page_size)

    def context(request: Request) -> dict[str, Any]:
        flash = FLASHES.get(request.query_params.get("flash", ""))
        return {
            "actor": request.state.actor if auth.required else None,
            "csrf": request.state.csrf,
            "flash": flash,
            "flash_kind": "ok" if flash else "",
        }

    def board(request: Request) -> Response:
        only = request.query_params.get("state") or None
        if only is not None and only not in {s.value for s in SECTION_ORDER}:
            return _text(f"unknown state {only!r}", 404)
        cursor = request.query_params.get("from")
        html = pages.board(LINKS, only, cursor, **context(request))
        return HTMLResponse(html)

    def task(request: Request) -> Response:
        return _page_or_error(
            lambda: pages.task(LINKS, request.path_params["slug"], **context(request))
        )

    def gate(request: Request) -> Response:
        return _page_or_error(
            lambda: pages.gate(LINKS, request.path_params["slug"], **context(request))
        )

    def history(request: Request) -> Response:
        params = request.query_params
        filters = {k: params[k] for k in ("task", "event", "actor") if params.get(k)}
        return HTMLResponse(pages.history(LINKS, filters, _page(request), **context(request)))

    async def approve(request: Request) -> Response:
        return await _post(request, "approve")

    async def reject(request: Request) -> Response:
        return await _post(request, "reject")

    async def refused(request: Request, slug: str, why: str) -> Response:
        shown = {**context(request), "flash": why, "flash_kind": "error"}
        html, _ = await run_in_threadpool(lambda: pages.gate(LINKS, slug, **shown))
        return HTMLResponse(html, status_code=409)

    async def _post(request: Request, action: str) -> Response:
        form = await request.form()
        posted = form.get("csrf")
        if not csrf_ok(request.scope, posted if isinstance(posted, str) else None):
            return _text("refused: missing or wrong CSRF token; reload the page", 403)
        slug = request.path_params["slug"]
        note = form.get("note")
        expect = form.get("expect")
        actor = request.state.actor
        if action == "reject" and not (isinstance(note, str) and note.strip()):
            return await refused(request, slug, NOTE_NEEDED)

        def run() -> actions.ActionResult:
            if action == "approve":
                seen = expect if isinstance(expect, str) else ""
                return approve_gate(engine, settings, slug, actor, _note(note), seen)
            to = form.get("to")  # the stage picked beside the note; "" = the gate's own
            return actions.reject(
                engine,
                settings,
                slug,
                actor,
                note if isinstance(note, str) else "",
                to if isinstance(to, str) and to else None,
            )

        try:
            result = await run_in_threadpool(run)
        except UnknownTaskError as exc:
            return _text(str(exc), 404)
        except RefusedError as exc:  # changed since you looked, no note, not at a gate
            return await refused(request, slug, str(exc))
        if not result.changed:  # lost a race: someone else approved it first (and who)
            return await refused(request, slug, result.message)
        done = "approved" if action == "approve" else "rejected"
        return RedirectResponse(f"/task/{quote(slug)}?flash={done}", status_code=303)

    routes = [
        Route("/", board),
        *task_routes(engine, settings, pages, context),
        Route("/task/{slug}", task),
        Route("/gate/{slug}", gate),
        Route("/gate/{slug}/approve", approve, methods=["POST"]),
        Route("/gate/{slug}/reject", reject, methods=["POST"]),
        Route("/history", history),
        *_plain_routes(engine),
    ]
    return Guard(Starlette(routes=routes), auth)


def _plain_routes(engine: Engine) -> list[Route]:
    """The machine-facing routes and the stylesheet: no template, no CSRF."""
    stylesheet = css()

    def healthz(_request: Request) -> Response:
        try:
            with read_tx(engine) as conn:
                ping(conn)
        except Exception as exc:  # any failure is "not healthy"
            return _text(f"database unreachable: {type(exc).__name__}", 503)
        return _text("ok")

    def metrics(_request: Request) -> Response:
        """Prometheus text from `orchestrator.views.metrics.render_metrics` when that
        module is installed; until then the route says so (501)."""
        try:
            module = importlib.import_module("orchestrator.views.metrics")
        except ImportError:
            return _text("metrics are not available in this version\n", 501)
        body = str(module.render_metrics(engine))
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")

    def style(_request: Request) -> Response:
        return Response(stylesheet, media_type="text/css")

    script = resources.files("orchestrator.web").joinpath("tail.js").read_text("utf-8")

    def tail_script(_request: Request) -> Response:
        return Response(script, media_type="text/javascript")

    return [
        Route("/healthz", healthz),
        Route("/metrics", metrics),
        Route("/static/style.css", style),
        Route("/static/tail.js", tail_script),
    ]


def _page(request: Request) -> int:
    try:
        return min(max(1, int(request.query_params.get("page", "1"))), MAX_PAGE)
    except ValueError:
        return 1


def _text(body: str, status: int = 200) -> Response:
    return PlainTextResponse(body if body.endswith("\n") else body + "\n", status_code=status)


def _note(note: object) -> str | None:
    """An approval's note, when one was written (the box is shared with Reject)."""
    return note if isinstance(note, str) and note.strip() else None


def _page_or_error(render: Callable[[], str | tuple[str, int]]) -> Response:
    try:
        page = render()
        html, status = page if isinstance(page, tuple) else (page, 200)
        return HTMLResponse(html, status_code=status)
    except UnknownTaskError as exc:
        return _text(str(exc), 404)
    except OrchestratorError as exc:
        return _text(str(exc), 409)
