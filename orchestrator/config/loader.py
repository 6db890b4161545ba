"""`load_settings` and the settings reader: [orchestrator], the database URL, the whole file.

The settings reader is the top of the reader chain (values, stages,
pipelines): it walks the file once, so every key is checked before the
engine sees any of it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.config.core import schema
from orchestrator.config.files import _absolute, _parse, _read, find_config, resolve_database_url
from orchestrator.config.model import DB_URL_ENV, DEFAULT_DATABASE, PipelineConfig, Settings
from orchestrator.config.orchestrator_table import ORCHESTRATOR_SECTION
from orchestrator.config.pipelines import _PipelineReader
from orchestrator.config.schema import Section, dotted, read_keys
from orchestrator.errors import ConfigError


def load_settings(
    *,
    config: str | Path | None = None,
    db_url: str | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    require_config: bool = False,
    sections: Sequence[Section[Any]] | None = None,
) -> Settings:
    """Find, read and validate the config; apply --db and the environment.

    `sections` are the features' keys (the engine's own come first); None
    is `config.sections.FEATURE_SECTIONS`, imported only here: the features'
    config modules import `config.schema`, so importing the list with the
    package would import a feature half-way through its own import."""
    if sections is None:
        from orchestrator.config.sections import FEATURE_SECTIONS

        sections = FEATURE_SECTIONS
    env = os.environ if environ is None else environ
    here = _absolute(Path.cwd() if cwd is None else cwd, Path.cwd())
    path = find_config(config, env, here)
    if path is None:
        if require_config:
            # Where it looked, and the two ways to the project that exists
            # before the way to a second one: from the wrong folder, `init`
            # would start another project beside the real one.
            raise ConfigError(
                f"no orchestrator.toml found in {here} (and no --config or "
                "ORCHESTRATOR_CONFIG given): `cd` to your project's folder, or pass "
                "`--config PATH/orchestrator.toml`; to start a new project here, "
                "`orchestrator init`"
            )
        data: dict[str, Any] = {}
        fingerprint = ""
        base_dir = here
    else:
        raw = _read(path)
        fingerprint = hashlib.sha256(raw).hexdigest()
        data = _parse(path, raw)
        base_dir = path.parent
    return _Loader(path, base_dir, sections).settings(data, db_url, env, here, fingerprint)


class _Loader(_PipelineReader):
    """Walks the parsed TOML once, turning it into Settings or a ConfigError."""

    def __init__(self, path: Path | None, base_dir: Path, sections: Sequence[Section[Any]]) -> None:
        super().__init__(path, base_dir)
        self.schema = schema(tuple(sections))

    def settings(
        self,
        data: dict[str, Any],
        db_url: str | None,
        environ: Mapping[str, str],
        cwd: Path,
        fingerprint: str,
    ) -> Settings:
        top = self.table(data, "", self.schema.top())
        orch = self.table(top.get("orchestrator", {}), "orchestrator", ORCHESTRATOR_SECTION.names())
        for section in self.schema.tables():
            if section.table is not None and section.read_table is not None:
                read = section.read_table(self, top.get(section.table))
                if section.extension:
                    self.extras[section.table] = read
                else:
                    self.read_tables[section.table] = read
        defaults = self.defaults(top.get("defaults", {}))
        pipelines = self.pipelines(top.get("pipelines", {}), defaults)
        database = self.database(orch, db_url, environ, cwd)
        keys = tuple(k for k in ORCHESTRATOR_SECTION.keys if k.name != "database")
        values: dict[str, Any] = {}
        for item in keys:
            # A default path is as written: beside the config, like one in it.
            values[item.name] = (
                item.kind.read(self, item.default, dotted("orchestrator", item.name), None)
                if item.read_default
                else item.default
            )
        read_keys(self, keys, orch, "orchestrator", values)
        self.shared_names(values["env"], values["env_deny"], pipelines)
        return Settings(
            config_path=self.file,
            base_dir=self.base_dir,
            database_url=database,
            pipelines=types.MappingProxyType(pipelines),
            fingerprint=fingerprint,
            extras=types.MappingProxyType(dict(self.extras)),
            **values,
            **self.read_tables,
        )

    def shared_names(
        self, env: tuple[str, ...], deny: tuple[str, ...], pipelines: Mapping[str, PipelineConfig]
    ) -> None:
        """Refuse an `env` name that is a secret by another key. `env` hands
        its names to every command past `env_deny`, so one that `env_deny`
        denies or a stage's `secrets` or a landing's `land_secrets` keeps
        would reach every stage: secrets go through those two keys only."""
        kept: dict[str, str] = {}
        for pipeline in pipelines.values():
            for name in pipeline.landing.secrets:
                kept.setdefault(name, f"pipelines.{pipeline.name}.land_secrets")
            for stage in pipeline.stages:
                for name in stage.secrets:
                    kept.setdefault(name, f"pipelines.{pipeline.name} stage {stage.name!r} secrets")
        for index, name in enumerate(env):
            key = f"orchestrator.env[{index}]"
            pattern = next((p for p in deny if name == p or fnmatch.fnmatchcase(name, p)), None)
            if pattern is not None:
                self.fail(
                    key, f"{name!r} matches env_deny ({pattern!r}): a denied name cannot be in env"
                )
            if name in kept:
                self.fail(
                    key,
                    f"{name!r} is a secret ({kept[name]}); a secret goes only through "
                    "`secrets` or `land_secrets`, never `env`",
                )

    def database(
        self, orch: dict[str, Any], db_url: str | None, environ: Mapping[str, str], cwd: Path
    ) -> str:
        """--db > ORCHESTRATOR_DB_URL > the file > beside the file.

        A path typed on the command line or exported in a shell means "here",
        so it is anchored at the cwd; one written in the file means "beside
        this file". An empty --db or environment value counts as unset.
        """
        if db_url:
            return resolve_database_url(db_url, cwd)
        from_env = environ.get(DB_URL_ENV, "")
        if from_env:
            return resolve_database_url(from_env, cwd)
        value = orch.get("database")
        url = DEFAULT_DATABASE if value is None else self.string(value, "orchestrator.database")
        return resolve_database_url(url, self.base_dir)
