"""The stage keys of best-attempt restore and verifier noise, declared.

Kept apart from the stage reader (long already) and on the standard
library only, like the guards' keys: the busy-lock path loads the config.
"""

from __future__ import annotations

from typing import Literal

from orchestrator.config.schema import STAGE_KEY, Choice, Integer, Key, Section

OnHalt = Literal["last", "best"]
ON_HALT: tuple[str, ...] = ("last", "best")
MAX_SAMPLES = 100  # a verifier run more often than this is a mistake, not a measure


SELECTION_SECTION: Section[None] = Section(
    name="restore",
    keys=(
        Key(
            "on_halt",
            Choice(ON_HALT),
            "last",
            "what a branch task's branch holds when the stage halts on `score_plateau` or "
            '`max_attempts`: `"last"` leaves the last attempt\'s work in the worktree '
            "(uncommitted); `\"best\"` puts the run's best-scoring attempt's kept work back as a "
            "commit on the branch (a tie goes to the earliest), marked `restored` "
            "([restore the best attempt](../how-to/candidates.md#restore-the-best-attempt))",
            STAGE_KEY,
        ),
        Key(
            "verifier_samples",
            Integer(1, maximum=MAX_SAMPLES),
            1,
            "run the verifier this many times (1-100) on the same work and record the median "
            "score, `pass` by strict majority, the reasons and hint of the median sample (for "
            "an even count, the lower middle one); a sample without a valid verdict makes the "
            "attempt's outcome its own. Later samples' output is `verifier-2.out`, … "
            "([measure a verifier's noise](../how-to/candidates.md#measure-a-verifiers-noise))",
            STAGE_KEY,
        ),
    ),
)
