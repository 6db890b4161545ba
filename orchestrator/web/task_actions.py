"""The task page's buttons: halt, resume and cancel, as the CLI runs them.

The same `api.actions` calls as `orchestrator halt|resume|cancel`, by the
page's authenticated user; the route checks the CSRF token before this
runs. Nothing else is reachable: an unknown action is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from orchestrator.api import actions
from orchestrator.config import Settings
from orchestrator.errors import RefusedError, UnknownTaskError
from orchestrator.web.pages import Pages
from orchestrator.web.render import Links
from orchestrator.web.security import csrf_ok
from orchestrator.web.tail import tail_events

LINKS = Links()

DONE = {"halt": "halted", "resume": "resumed", "cancel": "cancelled"}


def act(engine: Engine, slug: str, action: str, actor: str, note: object) -> str:
    """Run `action` on `slug`; the flash word for the page it redirects to."""
    text = note.strip() if isinstance(note, str) and note.strip() else None
    if action == "halt":
        result = actions.halt(engine, slug, actor, text)
    elif action == "resume":
        result = actions.resume(engine, slug, actor, text)
    elif action == "cancel":
        result = actions.cancel(engine, slug, actor, text)
    else:
        raise RefusedError(f"unknown task action {action!r} (halt, resume or cancel)")
    if not result.changed:
        raise RefusedError(result.message)
    return DONE[action]


def task_routes(
    engine: Engine,
    settings: Settings,
    pages: Pages,
    context: Callable[[Request], dict[str, Any]],
) -> list[Route]:
    """The task page's POST actions and its live tail's event stream."""

    async def task_action(request: Request) -> Response:
        """Halt, resume or cancel, the CSRF token checked first."""
        form = await request.form()
        posted = form.get("csrf")
        if not csrf_ok(request.scope, posted if isinstance(posted, str) else None):
            return _plain("refused: missing or wrong CSRF token; reload the page", 403)
        slug, action = request.path_params["slug"], request.path_params["action"]
        try:
            done = await run_in_threadpool(
                act, engine, slug, action, request.state.actor, form.get("note")
            )
        except UnknownTaskError as exc:
            return _plain(str(exc), 404)
        except RefusedError as exc:  # not allowed from its state (finished, not halted)
            shown = {**context(request), "flash": str(exc), "flash_kind": "error"}
            html = await run_in_threadpool(lambda: pages.task(LINKS, slug, **shown))
            return HTMLResponse(html, status_code=409)
        return RedirectResponse(f"/task/{quote(slug)}?flash={done}", status_code=303)

    async def tail(request: Request) -> Response:
        events = tail_events(engine, settings.state_root, request.path_params["slug"])
        return StreamingResponse(events, media_type="text/event-stream")

    return [
        Route("/task/{slug}/tail", tail),
        Route("/task/{slug}/{action}", task_action, methods=["POST"]),
    ]


def _plain(body: str, status: int) -> Response:
    return PlainTextResponse(body + "\n", status_code=status)
