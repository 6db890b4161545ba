"""The stage reader: [defaults] and each stage merged over them.

A stage inherits every key it does not set, so the merge and its checks
live in one place; which keys there are comes from the Sections.
"""

from __future__ import annotations

import types
from typing import Any

from orchestrator.config.model import COMPLETE, StageConfig
from orchestrator.config.schema import DEFAULTS, STAGE, Schema, dotted, read_keys
from orchestrator.config.values import _ValueReader
from orchestrator.domain.slug import slug_problem


class _StageReader(_ValueReader):
    """Reads [defaults] and each stage, merging a stage over the defaults it inherits."""

    schema: Schema

    def defaults(self, value: object) -> dict[str, Any]:
        """Validated stage defaults, in the shape `stage` merges over."""
        table = self.table(value, "defaults", self.schema.allowed(DEFAULTS))
        result = self.schema.defaults(STAGE)
        read_keys(self, self.schema.keys(DEFAULTS), table, "defaults", result)
        return result

    def stage(self, value: object, key: str, defaults: dict[str, Any]) -> StageConfig:
        table = self.table(value, key, self.schema.allowed(STAGE))
        if "name" not in table:
            self.fail(dotted(key, "name"), "missing: every stage needs a name")
        name = self.string(table["name"], dotted(key, "name"))
        problem = slug_problem(name)
        if problem is not None:
            self.fail(dotted(key, "name"), f"stage name: {problem}")
        if name == COMPLETE:
            self.fail(dotted(key, "name"), f"{COMPLETE!r} is reserved for finished tasks")
        merged = dict(defaults)
        keys = tuple(k for k in self.schema.keys(STAGE) if k.name != "name")
        read_keys(self, keys, table, key, merged)
        merged["name"] = name
        if merged["worker"] is None and merged["verifier"] is None:
            self.fail(key, f"stage {name!r} needs a worker, a verifier, or both")
        if merged["stdin"] == "prompt" and merged["prompt"] is None:
            inherited = "" if "stdin" in table else " (inherited from [defaults])"
            self.fail(
                dotted(key, "stdin"),
                f'stdin = "prompt"{inherited} needs a prompt template (prompt = "...")',
            )
        return StageConfig(**fields(self.schema, STAGE, merged))


def fields(schema: Schema, scope: str, values: dict[str, Any]) -> dict[str, Any]:
    """A config class's fields from the values read: each Section that
    builds an object fills its field, the others' keys are fields of their own."""
    found: dict[str, Any] = {}
    extras: dict[str, object] = {}
    for section in schema.in_scope(scope):
        if section.extension:
            extras[section.name] = section.built(values)
        elif section.field is not None:
            found[section.field] = section.built(values)
        else:
            found.update((k.name, values[k.name]) for k in section.keys if scope in k.scope)
    if extras:
        found["extras"] = types.MappingProxyType(extras)
    return found
