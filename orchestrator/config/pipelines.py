"""The pipeline reader: each [pipelines.NAME] and its ordered stages.

Stage names are unique within a pipeline because tasks record their stage
by name.
"""

from __future__ import annotations

from typing import Any, cast

from orchestrator.config.model import _PIPELINE_KEYS, COMPLETE, PipelineConfig, StageConfig
from orchestrator.config.sandbox import sandbox_of, sandbox_settings
from orchestrator.config.stages import _StageReader
from orchestrator.config.values import _key
from orchestrator.domain.slug import slug_problem
from orchestrator.features.landing.config import read_land_keys
from orchestrator.workspace.worktree import Identity


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
        # The pipeline's sandbox keys sit between [defaults] and its stages.
        defaults = {**defaults, **sandbox_settings(self, table, key)}
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
            if stage.candidates > 1 and "repository" not in table:
                # Each candidate works in a worktree of its own.
                self.fail(_key(stage_key, "candidates"), "needs `repository` in the pipeline")
            if stage.name in seen:
                self.fail(
                    _key(stage_key, "name"),
                    f"duplicate stage name {stage.name!r} (also {stages_key}[{seen[stage.name]}])",
                )
            seen[stage.name] = index
            stages.append(stage)
        branch = self.branch_keys(table, key)
        landing = read_land_keys(self, table, key, tuple((s.name, s.gate) for s in stages))
        return PipelineConfig(
            name=name,
            stages=tuple(stages),
            setup=setup,
            landing=landing,
            sandbox=sandbox_of(defaults),
            **branch,
        )

    def branch_keys(self, table: dict[str, Any], key: str) -> dict[str, Any]:
        """`repository`, `base`, `commit_author`, `keep_worktree_days`: the
        task-is-a-branch keys. The repository is checked when a task is
        added (it may not exist yet when the config is written)."""
        found: dict[str, Any] = {}
        if "repository" in table:
            found["repository"] = self.file_path(table["repository"], _key(key, "repository"))
        if "base" in table:
            base = self.string(table["base"], _key(key, "base"))
            if base.startswith("-") or any(c.isspace() or c in "~^:?*[\\" for c in base):
                self.fail(_key(key, "base"), f"{base!r} is not a branch name")
            found["base"] = base
        if "commit_author" in table:
            author = self.string(table["commit_author"], _key(key, "commit_author"))
            if Identity.parse(author) is None:
                self.expected(_key(key, "commit_author"), "'Name <email>'", author)
            found["commit_author"] = author
        if "keep_worktree_days" in table:
            found["keep_worktree_days"] = self.number(
                table["keep_worktree_days"], _key(key, "keep_worktree_days"), low=0, high=36500
            )
        needs_repository = ("base", "keep_worktree_days")
        for name in needs_repository:
            if name in table and "repository" not in table:
                self.fail(_key(key, name), "needs `repository` in the same pipeline")
        return found
