"""The stage reader: [defaults] and each stage merged over them.

A stage inherits every key it does not set, so the merge and its checks
live in one place.
"""

from __future__ import annotations

from typing import Any

from orchestrator.agents.config import AGENT_DEFAULTS, agent_settings
from orchestrator.config.model import _DEFAULTS_KEYS, _STAGE_KEYS, COMPLETE, StageConfig
from orchestrator.config.pools import read_pool_ref
from orchestrator.config.sandbox import SANDBOX_DEFAULTS, sandbox_of, sandbox_settings
from orchestrator.config.selection import read_selection, selection_defaults
from orchestrator.config.values import _key, _ValueReader
from orchestrator.domain.plateau import PlateauPolicy
from orchestrator.domain.slug import slug_problem
from orchestrator.guards.config import guard_defaults, read_guards


class _StageReader(_ValueReader):
    """Reads [defaults] and each stage, merging a stage over the defaults it inherits."""

    pool_names: frozenset[str] = frozenset()  # the `[pools.NAME]` a stage may name

    def defaults(self, value: object) -> dict[str, Any]:
        """Validated stage defaults, in the shape `stage` merges over."""
        table = self.table(value, "defaults", _DEFAULTS_KEYS)
        result: dict[str, Any] = {
            "gate": False,
            "max_attempts": 5,
            "timeout_seconds": 1800.0,
            "pass_score": 0.0,
            "plateau": PlateauPolicy(),
            "stdin": "none",
            "env": {},
            "worker_ok_exit": frozenset({0}),
            "pool": None,
            **AGENT_DEFAULTS,
            **guard_defaults(),
            **SANDBOX_DEFAULTS,
            **selection_defaults(),
        }
        self.stage_scalars(table, "defaults", result)
        return result

    def stage_scalars(self, table: dict[str, Any], key: str, into: dict[str, Any]) -> None:
        """The keys a stage shares with [defaults]; each overrides what `into` holds."""
        if "gate" in table:
            into["gate"] = self.boolean(table["gate"], _key(key, "gate"))
        if "max_attempts" in table:
            into["max_attempts"] = self.integer(table["max_attempts"], _key(key, "max_attempts"), 1)
        if "timeout_seconds" in table:
            into["timeout_seconds"] = self.number(
                table["timeout_seconds"], _key(key, "timeout_seconds"), low=0.0, low_inclusive=False
            )
        if "pass_score" in table:
            into["pass_score"] = self.number(
                table["pass_score"], _key(key, "pass_score"), low=0.0, high=1.0
            )
        if "plateau" in table:
            into["plateau"] = self.plateau(table["plateau"], _key(key, "plateau"), into["plateau"])
        if "stdin" in table:
            into["stdin"] = self.choice(table["stdin"], _key(key, "stdin"), ("none", "prompt"))
        if "env" in table:
            into["env"] = {**into["env"], **self.env(table["env"], _key(key, "env"))}
        if "worker_ok_exit" in table:
            into["worker_ok_exit"] = self.exit_statuses(
                table["worker_ok_exit"], _key(key, "worker_ok_exit")
            )
        if "pool" in table:
            into["pool"] = read_pool_ref(self, table["pool"], _key(key, "pool"), self.pool_names)
        into.update(agent_settings(self, table, key))
        read_guards(self, table, key, into)
        into.update(sandbox_settings(self, table, key))
        read_selection(self, table, key, into)

    def stage(self, value: object, key: str, defaults: dict[str, Any]) -> StageConfig:
        table = self.table(value, key, _STAGE_KEYS)
        if "name" not in table:
            self.fail(_key(key, "name"), "missing: every stage needs a name")
        name = self.string(table["name"], _key(key, "name"))
        problem = slug_problem(name)
        if problem is not None:
            self.fail(_key(key, "name"), f"stage name: {problem}")
        if name == COMPLETE:
            self.fail(_key(key, "name"), f"{COMPLETE!r} is reserved for finished tasks")
        merged = dict(defaults)
        self.stage_scalars(table, key, merged)
        worker = None if "worker" not in table else self.argv(table["worker"], _key(key, "worker"))
        verifier = (
            None if "verifier" not in table else self.argv(table["verifier"], _key(key, "verifier"))
        )
        if worker is None and verifier is None:
            self.fail(key, f"stage {name!r} needs a worker, a verifier, or both")
        prompt = (
            None if "prompt" not in table else self.file_path(table["prompt"], _key(key, "prompt"))
        )
        if merged["stdin"] == "prompt" and prompt is None:
            inherited = "" if "stdin" in table else " (inherited from [defaults])"
            self.fail(
                _key(key, "stdin"),
                f'stdin = "prompt"{inherited} needs a prompt template (prompt = "...")',
            )
        candidates = 1
        if "candidates" in table:
            candidates = self.integer(table["candidates"], _key(key, "candidates"), 1)
        return StageConfig(
            candidates=candidates,
            name=name,
            worker=worker,
            verifier=verifier,
            gate=merged["gate"],
            max_attempts=merged["max_attempts"],
            timeout_seconds=merged["timeout_seconds"],
            pass_score=merged["pass_score"],
            plateau=merged["plateau"],
            prompt=prompt,
            stdin=merged["stdin"],
            env=tuple(merged["env"].items()),
            worker_ok_exit=merged["worker_ok_exit"],
            output=merged["output"],
            verifier_output=merged["verifier_output"],
            max_cost_usd=merged["max_cost_usd"],
            secrets=merged["secrets"],
            strict_verdict=merged["strict_verdict"],
            halt_after_no_change=merged["halt_after_no_change"],
            retry_exit_codes=merged["retry_exit_codes"],
            backoff=merged["backoff"],
            pending_timeout=merged["pending_timeout"],
            pool=merged["pool"],
            sandbox=sandbox_of(merged),
            resume=merged["resume"],
            on_halt=merged["on_halt"],
            verifier_samples=merged["verifier_samples"],
        )
