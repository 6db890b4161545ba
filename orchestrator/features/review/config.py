"""The review loop's pipeline keys: whether a `land = "pr"` pipeline's pull
request is followed after it opens, how often it is read, and how many
rounds of feedback it may take. On the standard library only: the config
loader reads them on every tick, following or not."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.config.schema import PIPELINE_ONLY, Bool, Checks, Integer, Key, Section, Text

DEFAULT_POLL_SECONDS = 60
DEFAULT_MAX_FEEDBACK_ROUNDS = 3


@dataclass(frozen=True, slots=True)
class ReviewConfig:
    """Off unless `follow_pr`: a pipeline without it lands as it always did
    (its task complete once the pull request opens)."""

    follow: bool = False
    poll_seconds: int = DEFAULT_POLL_SECONDS
    max_rounds: int = DEFAULT_MAX_FEEDBACK_ROUNDS
    to: str | None = None  # None: the landing's `land_to`
    from_bots: bool = False


def _build(values: Mapping[str, Any]) -> ReviewConfig:
    return ReviewConfig(
        follow=values["follow_pr"],
        poll_seconds=values["poll_seconds"],
        max_rounds=values["max_feedback_rounds"],
        to=values["feedback_to"],
        from_bots=values["feedback_from_bots"],
    )


def _check(checks: Checks, values: dict[str, Any], key: str) -> None:
    if values["follow_pr"] and values.get("land", "pr") != "pr":
        checks.fail(f"{key}.follow_pr", 'follow_pr = true needs land = "pr" in the same pipeline')


REVIEW_SECTION: Section[ReviewConfig] = Section(
    name="review",
    keys=(
        Key(
            "follow_pr",
            Bool(),
            False,
            'with `land = "pr"`: the task waits `held` once its pull request opens and is '
            "followed until it is merged (`complete`) or closed (halted `pr_closed`); review "
            "feedback and failing checks send it back ([review loop](../how-to/review-loop.md))",
            PIPELINE_ONLY,
        ),
        Key(
            "poll_seconds",
            Integer(0, 86400),
            DEFAULT_POLL_SECONDS,
            "at most how often (seconds, 0 to 86400) a held task's pull request is read, each "
            "read a conditional request (`If-None-Match`) that costs no rate limit when nothing "
            "changed",
            PIPELINE_ONLY,
        ),
        Key(
            "max_feedback_rounds",
            Integer(0, 1000),
            DEFAULT_MAX_FEEDBACK_ROUNDS,
            "how many times (0 to 1000) review feedback or a failing check may send a held task "
            "back; the next one halts it `feedback_rounds`",
            PIPELINE_ONLY,
        ),
        Key(
            "feedback_to",
            Text(),
            None,
            "the stage review feedback sends the task back to (default: `land_to`'s)",
            PIPELINE_ONLY,
        ),
        Key(
            "feedback_from_bots",
            Bool(),
            False,
            "whether comments and reviews of bot accounts count as feedback (default: only "
            "people's)",
            PIPELINE_ONLY,
        ),
    ),
    build=_build,
    check=_check,
    extension=True,
)
