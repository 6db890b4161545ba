"""One Jinja environment for the served pages and the HTML report.

Autoescape is on for every template; Markdown goes through markdown-it with
raw HTML disabled, so a task body or a changed README can hold `<script>`
and it is shown as text. Links are built by a `Links` object: the server's
URLs, or anchors inside the one-file report.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererProtocol
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup

from orchestrator.web.data import COUNT_CAP, when

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False})
_SCHEME = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:")


def _local_source(src: str) -> bool:
    """A data: image or a path on the page's own origin: no other host is
    asked for anything when a page or the mailed report is opened."""
    if src.lower().startswith("data:image/"):
        return True
    return not _SCHEME.match(src) and not src.startswith(("/", "\\")) and "\\" not in src


def _image(
    self: RendererProtocol, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """A remote image (a tracking pixel, say) is shown as its alt text."""
    token = tokens[idx]
    if _local_source(str(token.attrs.get("src", ""))):
        return str(_MARKDOWN.renderer.image(tokens, idx, options, env))  # type: ignore[attr-defined]
    alt = _MARKDOWN.renderer.renderInlineAsText(token.children or [], options, env)  # type: ignore[attr-defined]
    return f'<span class="image-dropped">[image: {escapeHtml(alt)}]</span>'


_MARKDOWN.add_render_rule("image", _image)


def markdown(text: str) -> Markup:
    """Markdown to HTML; raw HTML is escaped, unsafe link schemes and remote
    images dropped."""
    return Markup(_MARKDOWN.render(text))  # noqa: S704 - markdown-it escapes with html=False


def css() -> str:
    return resources.files("orchestrator.web").joinpath("style.css").read_text("utf-8")


@dataclass(frozen=True)
class Links:
    """Where a page points: the server's routes, or anchors in one report file."""

    report: bool = False

    def board(self, status: str | None = None, cursor: str | None = None) -> str:
        if self.report:
            return "#board"
        query = {k: v for k, v in (("state", status), ("from", cursor)) if v}
        return "/" + ("?" + urlencode(query) if query else "")

    def task(self, slug: str) -> str:
        return f"#task-{slug}" if self.report else f"/task/{quote(slug)}"

    def gate(self, slug: str) -> str:
        return f"#gate-{slug}" if self.report else f"/gate/{quote(slug)}"

    def history(self, **filters: Any) -> str:
        if self.report:
            return "#history"
        kept = {k: v for k, v in filters.items() if v not in (None, "")}
        return "/history" + ("?" + urlencode(kept) if kept else "")


def _count(value: int) -> str:
    return f"{COUNT_CAP:,}+" if value >= COUNT_CAP else f"{value:,}"


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("orchestrator.web", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["markdown"] = markdown
    env.filters["when"] = when
    env.filters["count"] = _count
    return env
