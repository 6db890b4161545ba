"""Where the engine meets the agent runtime: each command's usage file, the
secrets a stage receives, and the usage an attempt recorded.

Usage is read back from the attempt's state folder when the attempt is
recorded (the captured stdout, and the file each command may write), so an
attempt that timed out or was stopped still records what it had spent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from orchestrator import safefs
from orchestrator.agents import kinds
from orchestrator.agents.output import OutputFormat, read_output
from orchestrator.agents.usage import AgentOutput, Usage, usage_from_report
from orchestrator.config import StageConfig

USAGE_FILE_ENV = "ORCHESTRATOR_USAGE_FILE"
# A usage report larger than this is not one (and is not read whole).
MAX_USAGE_FILE_BYTES = 65536
# The runner's capture of a stream is its bounded head and tail; a file far
# larger than any capture is not one, and is not read past this.
MAX_CAPTURE_READ = 64 << 20


def usage_file(state_dir: Path, name: str) -> Path:
    """`worker.usage.json` / `verifier.usage.json`: one per command, so a
    verifier that reports its own cost does not overwrite the worker's."""
    return state_dir / f"{name}.usage.json"


def command_env(env: Mapping[str, str], state_dir: Path, name: str) -> dict[str, str]:
    return {**env, USAGE_FILE_ENV: str(usage_file(state_dir, name))}


def stage_extra_env(stage: StageConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The stage's `env` over the `secrets` it names: a secret is taken from
    the tick's environment for this stage only, even when `env_deny` keeps
    it from all others."""
    secrets = {name: environ[name] for name in stage.secrets if name in environ}
    return {**secrets, **dict(stage.env)}


def with_reported_error(failure: str, fmt: OutputFormat, stdout: str) -> str:
    """A failed command's error, with the reason its envelope gives, if any."""
    if fmt == "text":
        return failure
    reported = read_output(fmt, stdout).error
    return failure if reported is None else f"{failure}; {reported}"


def read_usage_file(path: Path) -> Usage:
    """A missing, oversized or malformed report is no report: usage is
    bookkeeping, and must never fail an attempt. Only a regular file is
    read: the command chose what is at that path, and a FIFO (or a device)
    would block the tick for ever; a symlink could point anywhere."""
    try:
        raw = safefs.read_bytes(path, MAX_USAGE_FILE_BYTES + 1)
    except OSError:
        return Usage()
    if len(raw) > MAX_USAGE_FILE_BYTES:
        return Usage()
    try:
        return usage_from_report(json.loads(raw))
    except (ValueError, RecursionError):
        return Usage()


def _command_usage(state_dir: Path, name: str, fmt: OutputFormat) -> Usage:
    """What a kind's own output carries (`AgentKind.carries`) is never read
    from the usage file: that file is written by the command, that is by the
    agent itself, so the envelope's or the events' figure is the one
    charged, and where the output is missing or cut the figure is unknown
    (which a budget halts on), never the file's $0. Codex's events carry
    tokens but no dollar figure, so a Codex stage's cost can only come from
    its usage file."""
    reported = read_usage_file(usage_file(state_dir, name))
    kind = kinds.reading(fmt)
    if kind is None:
        return reported
    reported = replace(reported, **dict.fromkeys(kind.carries))
    try:
        # The command could have swapped its capture for a FIFO or a link
        # (to /dev/zero, say): only a regular file, and only so much of it.
        stdout = safefs.read_text(state_dir / f"{name}.out", MAX_CAPTURE_READ)
    except OSError:
        return reported
    return read_output(fmt, stdout).usage.filled_from(reported)


def attempt_usage(state_dir: Path | None, stage: StageConfig) -> dict[str, Any]:
    """The usage columns to record for the attempt whose folder is
    `state_dir` (None: it has none): the worker's and the verifier's, added."""
    if state_dir is None:
        return Usage().columns()
    total = _command_usage(state_dir, "worker", stage.output)
    for sample in range(stage.verifier_samples):  # each sample's own files
        total = total.plus(_command_usage(state_dir, sample_name(sample), stage.verifier_output))
    return total.columns()


def sample_name(sample: int) -> str:
    """The verifier's files (`.out`, `.usage.json`, `.proc`) for sample n
    (0-based) of `verifier_samples`: `verifier`, then `verifier-2`, ..."""
    return "verifier" if sample == 0 else f"verifier-{sample + 1}"


__all__ = [
    "USAGE_FILE_ENV",
    "AgentOutput",
    "attempt_usage",
    "command_env",
    "read_output",
    "read_usage_file",
    "sample_name",
    "stage_extra_env",
    "usage_file",
    "with_reported_error",
]
