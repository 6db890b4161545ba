"""`serve` refuses unsafe setups before it binds anything; Markdown stays inert."""

from __future__ import annotations

from support import Project

from orchestrator.web.render import markdown


def test_serve_refuses_unsafe_or_broken_setups(project: Project) -> None:
    bad_users = project.dir / "users"
    bad_users.write_text("alice:plaintext-password\n")
    short = project.dir / "token"
    short.write_text("short\n")
    cases = [
        (["--host", "example.com"], 1, "without authentication"),
        (["--host", "::"], 1, "without authentication"),
        (["--host", "0.0.0.0", "--token-file", str(short)], 1, "token is too short"),
        (["--host", "0.0.0.0", "--users", str(bad_users)], 78, "users:1: expected"),
        (["--add-user", "bob"], 1, "--add-user needs --users FILE"),
    ]
    for args, status, message in cases:
        result = project.cli("serve", *args)
        assert result.exit_code == status, (args, result.output)
        assert message in result.stderr, (args, result.stderr)


def test_markdown_keeps_html_and_script_links_inert() -> None:
    html = str(markdown("<script>alert(1)</script>\n\n[x](javascript:alert(2)) **ok**"))
    assert "<script" not in html and "&lt;script&gt;" in html
    assert "href" not in html  # the unsafe link stays text
    assert "<strong>ok</strong>" in html
