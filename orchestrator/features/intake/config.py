"""`[intake.github]`: which tracker's issues become tasks. On the standard
library only (the config loader reads it on every tick)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.config.schema import Checks, Integer, Key, Section, Text

SCOPE = frozenset({"intake"})
_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


@dataclass(frozen=True, slots=True)
class IntakeConfig:
    tracker: str  # "github"
    repo: str  # OWNER/NAME
    label: str = "agent"
    pipeline: str = "default"
    poll_seconds: int = 60


def _read(checks: Checks, value: object) -> object:
    """The trackers configured (`[intake.github]`), or none."""
    if value is None:
        return ()
    top = checks.table(value, "intake", ("github",))
    if "github" not in top:
        return ()
    found = checks.table(
        top["github"], "intake.github", ("repo", "label", "pipeline", "poll_seconds")
    )
    if "repo" not in found:
        checks.fail("intake.github.repo", "required: the repository as OWNER/NAME")
    repo = checks.string(found["repo"], "intake.github.repo")
    if not _REPO.fullmatch(repo):
        checks.fail("intake.github.repo", f"{repo!r} is not OWNER/NAME")
    label = checks.string(found.get("label", "agent"), "intake.github.label")
    pipeline = checks.string(found.get("pipeline", "default"), "intake.github.pipeline")
    poll = Integer(0, 86400).read(
        checks, found.get("poll_seconds", 60), "intake.github.poll_seconds", None
    )
    return (IntakeConfig("github", repo, label, pipeline, poll),)


INTAKE_SECTION: Section[None] = Section(
    name="intake",
    keys=(
        Key(
            "repo",
            Text(),
            None,
            "`[intake.github]`: the repository whose issues become tasks, as `OWNER/NAME` "
            "(required)",
            SCOPE,
        ),
        Key("label", Text(), "agent", "the label an open issue needs to become a task", SCOPE),
        Key("pipeline", Text(), "default", "the pipeline its tasks are added to", SCOPE),
        Key(
            "poll_seconds",
            Integer(0, 86400),
            60,
            "at most how often (seconds) the issues are read, each read conditional "
            "(`If-None-Match`)",
            SCOPE,
        ),
    ),
    table="intake",
    table_doc="issues that become tasks (`[intake.github]`; [intake](../how-to/intake.md))",
    read_table=_read,
    extension=True,
)


def intakes(settings: object) -> tuple[IntakeConfig, ...]:
    found = INTAKE_SECTION.table_of(settings)  # type: ignore[arg-type]
    return found if isinstance(found, tuple) else ()
