"""Versions through real `orchestrator tick` processes and real config
edits between them: every version a host loads is kept once, a task keeps
the version it was added on, each attempt records the one it ran, and
`show --json` and `pipelines` say so."""

from __future__ import annotations

import json

from support import Project, cli_json

PASS = ["sh", "-c", 'echo \'{"pass": true, "score": 1.0}\'']


def _config(project: Project, *, review: str = "review", judge: list[str] = PASS) -> None:
    project.write_config(
        "[[pipelines.default.stages]]\n"
        'name = "build"\n'
        'worker = ["true"]\n'
        f"verifier = {json.dumps(judge)}\n"
        'prompt = "prompts/build.md"\n\n'
        "[[pipelines.default.stages]]\n"
        f"name = {json.dumps(review)}\n"
        'worker = ["true"]\n'
        f"verifier = {json.dumps(PASS)}\n"
        "gate = true\n"
    )


def _prompt(project: Project, text: str) -> None:
    path = project.dir / "prompts" / "build.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _tick(project: Project) -> str:
    done = project.run("tick", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _add(project: Project, slug: str) -> None:
    done = project.run("add", slug, "--title", slug)
    assert done.returncode == 0, done.stdout + done.stderr


def _show(project: Project, slug: str) -> dict[str, object]:
    data: dict[str, object] = cli_json(project.cli("show", slug, "--json"))
    return data


def _versions(project: Project) -> list[str]:
    return [row[0] for row in project.query("SELECT hash FROM pipeline_versions ORDER BY hash")]


def test_tasks_and_attempts_record_the_version_they_ran(project: Project) -> None:
    _config(project)
    _prompt(project, "Build {slug}.\n")
    _add(project, "t1")
    first = _versions(project)
    assert len(first) == 1  # `add` keeps the version it loaded
    _tick(project)
    assert _versions(project) == first  # kept once
    shown = _show(project, "t1")
    assert shown["pipeline_version"] == first[0]
    attempts = shown["attempts"]
    assert isinstance(attempts, list)
    assert [a["stage"] for a in attempts] == ["build", "review"]  # now at the gate
    assert {a["pipeline_version"] for a in attempts} == {first[0]}

    _prompt(project, "Build {slug}, and test it.\n")  # a real edit between ticks
    _add(project, "t2")
    _tick(project)
    both = _versions(project)
    assert len(both) == 2 and first[0] in both
    second = next(v for v in both if v != first[0])
    assert _show(project, "t1")["pipeline_version"] == first[0]  # added on the first
    t2 = _show(project, "t2")
    assert t2["pipeline_version"] == second
    assert {a["pipeline_version"] for a in t2["attempts"]} == {second}  # type: ignore[attr-defined]
    rows = project.query("SELECT pipeline, host, definition FROM pipeline_versions")
    assert {row[0] for row in rows} == {"default"}
    assert all(row[1] for row in rows)
    assert all("prompts/build.md" not in row[2] for row in rows)


def test_a_reformatted_config_is_the_same_version(project: Project) -> None:
    _config(project)
    _prompt(project, "Build {slug}.\n")
    _add(project, "t1")
    # The same pipeline, other spacing and a comment; the prompt moved.
    moved = project.dir / "elsewhere" / "p.md"
    moved.parent.mkdir()
    moved.write_text("Build {slug}.\n", encoding="utf-8")
    text = project.config.read_text(encoding="utf-8")
    text = text.replace('"prompts/build.md"', '"elsewhere/p.md"').replace(" = ", "   =   ")
    project.config.write_text("# reformatted\n" + text, encoding="utf-8")
    _add(project, "t2")
    _tick(project)
    assert len(_versions(project)) == 1


def test_pipelines_lists_each_version_with_its_unfinished_tasks(project: Project) -> None:
    _config(project)
    _prompt(project, "Build {slug}.\n")
    _add(project, "old")
    _tick(project)  # old: build passed, now at the review gate's attempt
    (before,) = _versions(project)
    _config(project, review="check")  # the stage renamed: a new version
    _add(project, "new")
    listed = cli_json(project.cli("pipelines", "--json"))
    assert [p["pipeline"] for p in listed] == ["default"]
    default = listed[0]
    assert default["configured"] is True
    current = default["current"]
    assert current != before and current in _versions(project)
    by_version = {v["version"]: v for v in default["versions"]}
    assert set(by_version) == {before, current}
    assert by_version[before]["current"] is False
    assert by_version[before]["unfinished"] == 1
    assert by_version[before]["stages"] == {"review": 1}
    assert by_version[current]["current"] is True
    assert by_version[current]["stages"] == {"build": 1}
    assert by_version[current]["host"]
    table = project.cli("pipelines")
    assert table.exit_code == 0
    lines = table.output.splitlines()
    assert lines[0].split()[:3] == ["pipeline", "version", "current"]
    assert any(before[:12] in line and "review: 1" in line for line in lines)
    assert any(current[:12] in line and "yes" in line for line in lines)


def test_tasks_from_before_versions_show_as_none_until_claimed(project: Project) -> None:
    _config(project)
    _prompt(project, "Build {slug}.\n")
    _add(project, "legacy")
    _forget_versions(project)
    listed = cli_json(project.cli("pipelines", "--json"))
    versions = listed[0]["versions"]
    assert versions[-1] == {
        "version": None,
        "current": False,
        "first_seen": None,
        "host": None,
        "unfinished": 1,
        "stages": {"build": 1},
    }
    assert _show(project, "legacy")["pipeline_version"] is None
    _tick(project)  # its first claim since gives it the attempt's version
    (kept,) = _versions(project)
    assert _show(project, "legacy")["pipeline_version"] == kept


def _forget_versions(project: Project) -> None:
    """The task as a database from before versions holds it."""
    from sqlalchemy import create_engine, text

    engine = create_engine(project.db_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE tasks SET pipeline_version = NULL"))
            conn.execute(text("DELETE FROM pipeline_versions"))
    finally:
        engine.dispose()


def test_a_config_without_prompts_still_has_a_version(project: Project) -> None:
    project.write_config(
        '[[pipelines.default.stages]]\nname = "only"\nworker = ["true"]\n'
        f"verifier = {json.dumps(PASS)}\n"
    )
    _add(project, "t1")
    _tick(project)
    (kept,) = _versions(project)
    assert _show(project, "t1")["attempts"][0]["pipeline_version"] == kept  # type: ignore[index]
