"""The engine's own keys: a pipeline's and a stage's frame (name, commands,
attempts, plateau), declared like any feature's; `[orchestrator]` is
`orchestrator_table`.

The top-level tables `defaults` and `pipelines` are the engine's too; the
other top-level tables belong to the Section that names them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from orchestrator.config.orchestrator_table import ORCHESTRATOR_SECTION
from orchestrator.config.schema import (
    PIPELINE_ONLY,
    STAGE_KEY,
    STAGE_ONLY,
    Argv,
    Checked,
    Checks,
    Choice,
    Env,
    ExitStatuses,
    FilePath,
    Integer,
    Key,
    Nested,
    Number,
    Raw,
    Schema,
    Section,
    Text,
    dotted,
)
from orchestrator.domain.plateau import PlateauPolicy
from orchestrator.workspace.worktree import Identity

PLATEAU = frozenset({"plateau"})

# The top-level tables the engine reads itself, with their line in the reference.
ENGINE_TABLES: tuple[tuple[str, str], ...] = (
    ("orchestrator", "the settings below"),
    (
        "defaults",
        "stage keys every stage inherits unless it sets its own "
        "(`plateau` and `env` merge key by key)",
    ),
    (
        "pipelines",
        "`[pipelines.NAME]`, one per pipeline; tasks name theirs "
        "(`add --pipeline`, default `default`)",
    ),
)


def _plateau_check(checks: Checks, values: dict[str, Any], key: str) -> None:
    try:
        PlateauPolicy(**values)
    except ValueError as exc:
        checks.fail(key, str(exc))


PLATEAU_SECTION: Section[PlateauPolicy] = Section(
    name="plateau",
    table="plateau",
    keys=(
        Key("patience", Integer(1), 3, "P, an integer ≥ 1: the scores in the window", PLATEAU),
        Key("min_delta", Number(low=0.0), 0.01, "d ≥ 0: what counts as improvement", PLATEAU),
        Key(
            "mode",
            Choice(("abs", "rel")),
            "abs",
            '`"abs"`: the window must beat `best_before + d`; `"rel"`: `best_before * (1 + d)`',
            PLATEAU,
        ),
        Key(
            "min_attempts",
            Integer(1),
            None,
            "nothing is judged before `max(min_attempts, patience + 1)` valid scores (a "
            "smaller value has no effect)",
            PLATEAU,
            shown="`patience + 1`",
        ),
    ),
    build=lambda values: PlateauPolicy(**values),
    check=_plateau_check,
)


def _plateau_fields(policy: PlateauPolicy) -> Mapping[str, Any]:
    return asdict(policy)


def _branch_name(checks: Checks, base: str, key: str) -> None:
    if base.startswith("-") or any(c.isspace() or c in "~^:?*[\\" for c in base):
        checks.fail(key, f"{base!r} is not a branch name")


def _identity(checks: Checks, author: str, key: str) -> None:
    if Identity.parse(author) is None:
        checks.expected(key, "'Name <email>'", author)


def _needs_repository(checks: Checks, values: dict[str, Any], key: str) -> None:
    for name in ("base", "keep_worktree_days"):
        if values[name] is not None and values["repository"] is None:
            checks.fail(dotted(key, name), "needs `repository` in the same pipeline")


@dataclass(frozen=True)
class Gate:
    """true, false, or "auto" (a feature may open the gate itself:
    `TickHooks.open_gate`); a gate either way."""

    def read(self, checks: Checks, value: object, key: str, inherited: Any) -> bool | str:
        if value == "auto" and isinstance(value, str):
            return "auto"
        if not isinstance(value, bool):
            checks.expected(key, 'true, false or "auto"', value)
        return value


STAGE_SECTION: Section[None] = Section(
    name="engine",
    keys=(
        Key(
            "name",
            Raw(),
            None,
            "the stage's name: the slug rule; `complete` is reserved; unique in the pipeline",
            STAGE_ONLY,
            shown="(required)",
        ),
        Key(
            "gate",
            Gate(),
            False,
            'a passing verdict waits at `:awaiting_approval` for `approve`; `"auto"`: a '
            "feature may open it itself ([gates that earn autonomy](../how-to/evidence.md))",
            STAGE_KEY,
        ),
        Key(
            "worker",
            Argv(),
            None,
            "argv list that does the work. A stage needs a worker, a verifier, or both",
            STAGE_ONLY,
        ),
        Key(
            "verifier",
            Argv(),
            None,
            "argv list that judges the work and prints the verdict; without one the verdict is "
            "read from the worker's output. Its exit status is ignored once it printed a verdict",
            STAGE_ONLY,
        ),
        Key(
            "stdin",
            Choice(("none", "prompt")),
            "none",
            '`"prompt"` feeds the rendered prompt on the commands\' stdin (how `claude -p`, '
            "`codex exec -` and aider `--message-file` take prompts); needs `prompt`",
            STAGE_KEY,
        ),
        Key(
            "prompt",
            FilePath(),
            None,
            "prompt template file, rendered for each attempt to `prompt.md` in the attempt's "
            "state folder (`{prompt_file}`, `ORCHESTRATOR_PROMPT_FILE`)",
            STAGE_ONLY,
        ),
        Key(
            "env",
            Env(),
            (),
            'extra environment for the stage\'s commands, `{ NAME = "value" }`; cannot set '
            "`ORCHESTRATOR_*` names",
            STAGE_KEY,
            shown="`{}`",
        ),
        Key(
            "max_attempts",
            Integer(1),
            5,
            "attempts per run of the stage before it halts as `max_attempts` (interrupted ones "
            "do not count)",
            STAGE_KEY,
        ),
        Key(
            "timeout_seconds",
            Number(low=0.0, low_inclusive=False),
            1800.0,
            "per command; on timeout the whole process group is killed and the outcome is "
            "`timeout`",
            STAGE_KEY,
        ),
        Key(
            "pass_score",
            Number(low=0.0, high=1.0),
            0.0,
            "a verdict passes only when `pass` is true and `score >= pass_score`",
            STAGE_KEY,
            shown="`0.0`",
        ),
        Key(
            "plateau",
            Nested(PLATEAU_SECTION, _plateau_fields),
            PlateauPolicy(),
            "the [plateau rule](../explanation/verdicts-and-plateau.md#the-plateau-rule); keys "
            "below",
            STAGE_KEY,
            shown='`{ patience = 3, min_delta = 0.01, mode = "abs" }`',
        ),
        Key(
            "worker_ok_exit",
            ExitStatuses(),
            frozenset({0}),
            "worker exit statuses that still go on to the verifier; must include 0. A linter "
            "that exits 1 while findings remain (`ruff check --fix`) needs `[0, 1]`; any other "
            "status, a signal, a timeout or a failed start is a `worker_error`",
            STAGE_KEY,
        ),
    ),
)

PIPELINE_SECTION: Section[None] = Section(
    name="engine",
    keys=(
        Key(
            "setup",
            Argv(),
            None,
            "optional argv list run once per task, in `workspace_root`, to create the "
            "workspace (`git worktree add {workspace} ...`)",
            PIPELINE_ONLY,
        ),
        Key(
            "stages",
            Raw(),
            None,
            "the ordered list of `[[pipelines.NAME.stages]]`, at least one",
            PIPELINE_ONLY,
        ),
        Key(
            "repository",
            FilePath(),
            None,
            "a git repository: each task of the pipeline is a branch of it, `task/<slug>`, "
            "worked on in its own worktree at `<workspace_root>/<slug>/`, and each passed stage "
            "is one commit there ([worktrees](../how-to/worktrees.md)); checked when a task is "
            "added",
            PIPELINE_ONLY,
        ),
        Key(
            "base",
            Checked(Text(), _branch_name),
            None,
            "the branch tasks start from (default: the branch checked out in `repository` "
            "when the task is added); needs `repository`",
            PIPELINE_ONLY,
        ),
        Key(
            "commit_author",
            Checked(Text(), _identity),
            "orchestrator <orchestrator@localhost>",
            "`'Name <email>'` of the stage commits (default "
            "`orchestrator <orchestrator@localhost>`)",
            PIPELINE_ONLY,
        ),
        Key(
            "keep_worktree_days",
            Number(low=0, high=36500),
            None,
            "remove a finished task's worktree this many days (0 to 36500) after it finished, "
            "at the end of a tick; its branch stays (default: keep until `prune --finished`); "
            "needs `repository`",
            PIPELINE_ONLY,
        ),
    ),
    check=_needs_repository,
)

CANDIDATES_SECTION: Section[None] = Section(
    name="candidates",
    keys=(
        Key(
            "candidates",
            Integer(1),
            1,
            "best of N: a claim of the stage opens this many candidates at once, each in its "
            "own worktree from the task's branch, claimable on their own (by `--jobs` slots and "
            "other hosts); the best passing score wins, the round counts as one attempt. Needs "
            "`repository` in the pipeline. See [best of N](../how-to/candidates.md)",
            STAGE_ONLY,
        ),
    ),
)

ENGINE_SECTIONS: tuple[Section[None], ...] = (ORCHESTRATOR_SECTION, STAGE_SECTION, PIPELINE_SECTION)


def schema(features: tuple[Section[Any], ...]) -> Schema:
    """The engine's Sections, then the features'."""
    return Schema(
        sections=(*ENGINE_SECTIONS, *features),
        engine_tables=tuple(name for name, _doc in ENGINE_TABLES),
    )
