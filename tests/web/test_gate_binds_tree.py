"""The web gate binds an approval to the tree its page showed, as the CLI's
`approve --expect` does: an edit after the page was drawn refuses the
form (409), and one after the approval does not land. A real `serve`
process, a real repository and worktree, on both backends."""

from __future__ import annotations

import re
import urllib.error
import urllib.request

from e2e.test_approved_tree import append, gated_landing, land
from support import Project, git
from web_support import Served, serving


def _look(base: Served) -> tuple[str, str]:
    """The gate page's form fields (csrf, expect) and its cookie."""
    look = urllib.request.Request(base + "/gate/fix", headers=base.headers)
    with urllib.request.urlopen(look, timeout=30) as answer:
        cookie = answer.headers["Set-Cookie"].split(";")[0]
        page = answer.read().decode()
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    digest = re.search(r'name="expect" value="([^"]+)"', page)
    assert csrf and digest, page
    return f"csrf={csrf.group(1)}&expect={digest.group(1)}", cookie


def _approve(base: Served, form: str, cookie: str) -> int:
    post = urllib.request.Request(
        base + "/gate/fix/approve", data=form.encode(), headers={"Cookie": cookie, **base.headers}
    )
    try:
        with urllib.request.urlopen(post, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_the_web_gate_lands_the_tree_its_page_showed(project: Project) -> None:
    repo = gated_landing(project)
    append(project, "seen on the page\n")
    with serving(project) as base:
        form, cookie = _look(base)
        append(project, "EVIL\n")  # after the page was drawn
        assert _approve(base, form, cookie) == 409
        assert project.state("fix") == "implement:awaiting_approval"
        (project.dir / "tasks" / "fix" / "feature.txt").write_text("good\nseen on the page\n")
        form, cookie = _look(base)
        assert _approve(base, form, cookie) == 200  # after the 303 to the task page
    assert project.state("fix") == "implement:approved"
    append(project, "EVIL\n")  # after the approval
    land(project)
    assert git(repo, "show", "main:feature.txt") == "good\nseen on the page\n"
