"""The stage reader: [defaults] and each stage merged over them.

A stage inherits every key it does not set, so the merge and its checks
live in one place; which keys there are comes from the Sections.
"""

from __future__ import annotations

import types
from typing import Any

from orchestrator.config.model import COMPLETE, StageConfig
from orchestrator.config.schema import DEFAULTS, STAGE, Schema, dotted, read_keys
from orchestrator.config.values import ValueReader
from orchestrator.domain.slug import slug_problem


class StageReader:
    """Reads [defaults] and each stage, merging a stage over the defaults it inherits."""

    def __init__(self, values: ValueReader, schema: Schema) -> None:
        self.values = values
        self.schema = schema

    def defaults(self, value: object) -> dict[str, Any]:
        """Validated stage defaults, in the shape `stage` merges over."""
        v = self.values
        table = v.table(value, "defaults", self.schema.allowed(DEFAULTS))
        result = self.schema.defaults(STAGE)
        read_keys(v, self.schema.keys(DEFAULTS), table, "defaults", result)
        return result

    def stage(self, value: object, key: str, defaults: dict[str, Any]) -> StageConfig:
        v = self.values
        table = v.table(value, key, self.schema.allowed(STAGE))
        if "name" not in table:
            v.fail(dotted(key, "name"), "missing: every stage needs a name")
        name = v.string(table["name"], dotted(key, "name"))
        problem = slug_problem(name)
        if problem is not None:
            v.fail(dotted(key, "name"), f"stage name: {problem}")
        if name == COMPLETE:
            v.fail(dotted(key, "name"), f"{COMPLETE!r} is reserved for finished tasks")
        merged = dict(defaults)
        keys = tuple(k for k in self.schema.keys(STAGE) if k.name != "name")
        read_keys(v, keys, table, key, merged)
        merged["name"] = name
        if merged["worker"] is None and merged["verifier"] is None:
            v.fail(key, f"stage {name!r} needs a worker, a verifier, or both")
        if merged["stdin"] == "prompt" and merged["prompt"] is None:
            inherited = "" if "stdin" in table else " (inherited from [defaults])"
            v.fail(
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
            # Kept only when set otherwise than by default (`Section.of`
            # builds the default): a stage that does not use a feature
            # equals one made without it.
            built = section.built(values)
            if built != section.built(section.defaults()):
                extras[section.name] = built
        elif section.field is not None:
            found[section.field] = section.built(values)
        else:
            found.update((k.name, values[k.name]) for k in section.keys if scope in k.scope)
    if extras:
        found["extras"] = types.MappingProxyType(extras)
    return found
