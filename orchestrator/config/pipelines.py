"""The pipeline reader: each [pipelines.NAME] and its ordered stages.

Stage names are unique within a pipeline because tasks record their stage
by name.
"""

from __future__ import annotations

from typing import Any, cast

from orchestrator.config.model import _PIPELINE_KEYS, COMPLETE, PipelineConfig, StageConfig
from orchestrator.config.stages import _StageReader
from orchestrator.config.values import _key
from orchestrator.domain.slug import slug_problem


class _PipelineReader(_StageReader):
    """Reads [pipelines.NAME] and its stages, with names unique per pipeline."""

    def pipelines(self, value: object, defaults: dict[str, Any]) -> dict[str, PipelineConfig]:
        if not isinstance(value, dict):
            self.expected("pipelines", "a table of pipelines", value)
        result: dict[str, PipelineConfig] = {}
        for name, body in cast(dict[str, Any], value).items():
            key = _key("pipelines", name)
            problem = slug_problem(name)
            if problem is not None:
                self.fail(key, f"pipeline name: {problem}")
            result[name] = self.pipeline(name, body, key, defaults)
        return result

    def pipeline(
        self, name: str, value: object, key: str, defaults: dict[str, Any]
    ) -> PipelineConfig:
        table = self.table(value, key, _PIPELINE_KEYS)
        setup = None if "setup" not in table else self.argv(table["setup"], _key(key, "setup"))
        stages_key = _key(key, "stages")
        raw_stages = table.get("stages")
        if raw_stages is None or raw_stages == []:
            self.fail(stages_key, "a pipeline needs at least one stage ([[pipelines.NAME.stages]])")
        if not isinstance(raw_stages, list):
            self.expected(stages_key, "an array of tables ([[pipelines.NAME.stages]])", raw_stages)
        stages: list[StageConfig] = []
        seen: dict[str, int] = {}
        for index, raw in enumerate(raw_stages):
            stage_key = f"{stages_key}[{index}]"
            named = raw.get("name") if isinstance(raw, dict) else None
            if isinstance(named, str) and named != COMPLETE and slug_problem(named) is None:
                # The index alone makes a reader count tables in the file.
                stage_key += f" ({named})"
            stage = self.stage(raw, stage_key, defaults)
            if stage.name in seen:
                self.fail(
                    _key(stage_key, "name"),
                    f"duplicate stage name {stage.name!r} (also {stages_key}[{seen[stage.name]}])",
                )
            seen[stage.name] = index
            stages.append(stage)
        return PipelineConfig(name=name, stages=tuple(stages), setup=setup)
