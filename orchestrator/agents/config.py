"""The stage keys of the agent runtime (each may sit in `[defaults]`):
`output`, `verifier_output`, `max_cost_usd`, `secrets`, `memory_mb`, and
`resume` (the worker resumes the agent session, `agents/resume.py`).
Declared here, by the agents that read them; the config reader only walks
the Section. `memory_mb` is here rather than with the memory feature that
reads it because its default is the agent kind's (`AgentKind.memory_mb`),
and because the engine's config may not import a feature."""

from __future__ import annotations

import re

from orchestrator.agents.output import OUTPUT_FORMATS
from orchestrator.config.schema import (
    STAGE_KEY,
    Bool,
    Checked,
    Checks,
    Choice,
    Integer,
    Key,
    Number,
    Section,
    Strings,
)

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _secret_names(checks: Checks, names: tuple[str, ...], key: str) -> None:
    for index, name in enumerate(names):
        if not _ENV_NAME.fullmatch(name) or name.startswith("ORCHESTRATOR_"):
            checks.fail(
                f"{key}[{index}]",
                f"{name!r} is not an environment variable name a stage may receive",
            )


AGENT_SECTION: Section[None] = Section(
    name="agents",
    keys=(
        Key(
            "output",
            Choice(OUTPUT_FORMATS),
            "text",
            'how to read the worker\'s stdout: `"text"`, `"claude-json"` (Claude Code\'s '
            '`--output-format json` envelope) or `"codex-jsonl"` (`codex exec --json` events); '
            "see [agents](../how-to/agents.md)",
            STAGE_KEY,
        ),
        Key(
            "verifier_output",
            Choice(OUTPUT_FORMATS),
            "text",
            "the same for the verifier's stdout (an LLM judge run as the verifier)",
            STAGE_KEY,
        ),
        Key(
            "max_cost_usd",
            Number(low=0.0, low_inclusive=False),
            None,
            "halt the task as `budget` before another attempt once it has spent this much "
            "(US dollars, as recorded) at this stage, over all its runs",
            STAGE_KEY,
        ),
        Key(
            "secrets",
            Checked(Strings(), _secret_names),
            (),
            "environment variable names passed from the tick's environment (or `env_file`) to "
            "this stage's commands only (API keys): no other stage, no `setup` and no hook "
            "inherits a name any stage lists here, with or without `env_deny`",
            STAGE_KEY,
        ),
        Key(
            "memory_mb",
            Integer(0),
            None,
            "MiB an attempt of the stage reserves on its host: a tick starts it only while "
            "the host's `MemAvailable` minus what the attempts running there reserved is at "
            "least this, else the task waits and spends no attempt; 0 never waits. Unset: "
            "2048 when the worker's or verifier's `output` is an agent's (`claude-json`, "
            "`codex-jsonl`), else 0; see [memory](../how-to/memory.md)",
            STAGE_KEY,
            shown="(the agent kind's)",
        ),
    ),
)

RESUME_SECTION: Section[None] = Section(
    name="resume",
    keys=(
        Key(
            "resume",
            Bool(),
            False,
            "`true`: from the second attempt on, the worker resumes the agent session the "
            "stage's previous attempt recorded (`{prev_session}`): `claude --resume ID` for "
            '`output = "claude-json"`, `codex exec ... resume ID -` for `"codex-jsonl"`; '
            "when the agent says the session is gone, the worker runs again afresh in the same "
            "attempt (counted once, `resume.txt` in its state folder says why) "
            "([sandbox](../how-to/sandbox.md#resume-a-session))",
            STAGE_KEY,
        ),
    ),
)
