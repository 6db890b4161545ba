"""The pipeline reader: each [pipelines.NAME] and its ordered stages.

Stage names are unique within a pipeline because tasks record their stage
by name.
"""

from __future__ import annotations

from typing import Any, cast

from orchestrator.config.model import COMPLETE, PipelineConfig, StageConfig
from orchestrator.config.schema import PIPELINE, STAGE, Schema, dotted, read_keys
from orchestrator.config.stages import StageReader, fields
from orchestrator.config.values import ValueReader
from orchestrator.domain.slug import slug_problem


class PipelineReader:
    """Reads [pipelines.NAME] and its stages, with names unique per pipeline."""

    def __init__(self, values: ValueReader, schema: Schema, stages: StageReader) -> None:
        self.values = values
        self.schema = schema
        self.stages = stages

    def pipelines(self, value: object, defaults: dict[str, Any]) -> dict[str, PipelineConfig]:
        if not isinstance(value, dict):
            self.values.expected("pipelines", "a table of pipelines", value)
        result: dict[str, PipelineConfig] = {}
        for name, body in cast(dict[str, Any], value).items():
            key = dotted("pipelines", name)
            problem = slug_problem(name)
            if problem is not None:
                self.values.fail(key, f"pipeline name: {problem}")
            result[name] = self.pipeline(name, body, key, defaults)
        return result

    def pipeline(
        self, name: str, value: object, key: str, defaults: dict[str, Any]
    ) -> PipelineConfig:
        v = self.values
        table = v.table(value, key, self.schema.allowed(PIPELINE))
        keys = self.schema.keys(PIPELINE)
        # A key a stage inherits too sits between [defaults] and the stages.
        values = {k.name: defaults[k.name] if STAGE in k.scope else k.default for k in keys}
        read_keys(v, tuple(k for k in keys if k.name != "stages"), table, key, values)
        defaults = {**defaults, **{k.name: values[k.name] for k in keys if STAGE in k.scope}}
        stages_key = dotted(key, "stages")
        raw_stages = table.get("stages")
        if raw_stages is None or raw_stages == []:
            v.fail(stages_key, "a pipeline needs at least one stage ([[pipelines.NAME.stages]])")
        if not isinstance(raw_stages, list):
            v.expected(stages_key, "an array of tables ([[pipelines.NAME.stages]])", raw_stages)
        stages: list[StageConfig] = []
        seen: dict[str, int] = {}
        for index, raw in enumerate(raw_stages):
            stage_key = f"{stages_key}[{index}]"
            named = raw.get("name") if isinstance(raw, dict) else None
            if isinstance(named, str) and named != COMPLETE and slug_problem(named) is None:
                # The index alone makes a reader count tables in the file.
                stage_key += f" ({named})"
            stage = self.stages.stage(raw, stage_key, defaults)
            if stage.candidates > 1 and "repository" not in table:
                # Each candidate works in a worktree of its own.
                v.fail(dotted(stage_key, "candidates"), "needs `repository` in the pipeline")
            if stage.name in seen:
                v.fail(
                    dotted(stage_key, "name"),
                    f"duplicate stage name {stage.name!r} (also {stages_key}[{seen[stage.name]}])",
                )
            seen[stage.name] = index
            stages.append(stage)
        values["stages"] = tuple(stages)
        for section in self.schema.in_scope(PIPELINE):
            if section.check is not None:
                section.check(v, values, key)
        return PipelineConfig(name=name, **fields(self.schema, PIPELINE, values))
