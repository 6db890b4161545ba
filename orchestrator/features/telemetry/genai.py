"""What a span says, from the GenAI semantic conventions where they apply
(the agent's provider, model and token use, so they show up beside the
rest of an operator's LLM traffic) and ours (task, stage, attempt,
verdict, score, cost). Pure: no SDK, no query."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

MODEL_FLAGS = ("--model", "-m")
# Outcomes that are the attempt's failure to run, not a verdict's no.
VERDICT_OUTCOMES = frozenset({"passed", "failed", "pending"})

AttributeValue = str | bool | int | float


def provider(argv: Sequence[str], output: str) -> str | None:
    """`gen_ai.system`: the agent kind's provider (`AgentKind.provider`), the
    kind found by the program's name, else by the stage's output format."""
    from orchestrator.agents import kinds

    program = PurePath(argv[0]).name if argv else ""
    for kind in kinds.KINDS:
        if kind.provider is not None and program in (kind.name, kind.program):
            return kind.provider
    by_output = kinds.reading(output)
    return None if by_output is None else by_output.provider


def model(argv: Sequence[str]) -> str | None:
    """`gen_ai.request.model`: the model the worker's argv asks for."""
    for index, arg in enumerate(argv):
        for flag in MODEL_FLAGS:
            if arg == flag and index + 1 < len(argv):
                return argv[index + 1]
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return None


def agent_attributes(
    argv: Sequence[str], output: str, row: Mapping[str, Any]
) -> dict[str, AttributeValue]:
    """The GenAI attributes of an attempt's worker: its provider and model,
    and the tokens the agent reported (the attempt's row)."""
    found: dict[str, AttributeValue | None] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.system": provider(argv, output),
        "gen_ai.request.model": model(argv),
        "gen_ai.usage.input_tokens": row.get("input_tokens"),
        "gen_ai.usage.output_tokens": row.get("output_tokens"),
    }
    return {key: value for key, value in found.items() if value is not None}


def attempt_attributes(
    *, slug: str, pipeline: str, stage: str, number: int, run: int, row: Mapping[str, Any]
) -> dict[str, AttributeValue]:
    """Ours: which attempt of which task, and how it ended."""
    verdict = row.get("pass")
    found: dict[str, AttributeValue | None] = {
        "orchestrator.task": slug,
        "orchestrator.pipeline": pipeline,
        "orchestrator.stage": stage,
        "orchestrator.attempt": number,
        "orchestrator.run": run,
        "orchestrator.outcome": row.get("outcome"),
        "orchestrator.verdict": None if verdict is None else ("pass" if verdict else "fail"),
        "orchestrator.score": row.get("score"),
        "orchestrator.cost_usd": row.get("cost_usd"),
        "orchestrator.turns": row.get("turns"),
        "orchestrator.error": row.get("error"),
    }
    return {key: value for key, value in found.items() if value is not None}


def failed(outcome: object) -> bool:
    """Whether the attempt's span is an error: it did not reach a verdict."""
    return isinstance(outcome, str) and outcome not in VERDICT_OUTCOMES
