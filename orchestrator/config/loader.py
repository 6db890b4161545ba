"""`load_settings` and the settings reader: [orchestrator], the database URL, the whole file.

The settings reader is the top of the reader chain (values, stages,
pipelines): it walks the file once, so every key is checked before the
engine sees any of it.
"""

from __future__ import annotations

import hashlib
import os
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from orchestrator.config.files import _absolute, _parse, _read, find_config, resolve_database_url
from orchestrator.config.model import (
    _ORCHESTRATOR_KEYS,
    _TOP_KEYS,
    DB_URL_ENV,
    DEFAULT_DATABASE,
    Affinity,
    Settings,
)
from orchestrator.config.pipelines import _PipelineReader
from orchestrator.config.pools import read_pools
from orchestrator.config.values import _key
from orchestrator.errors import ConfigError
from orchestrator.events.hooks import parse_hooks


def load_settings(
    *,
    config: str | Path | None = None,
    db_url: str | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    require_config: bool = False,
) -> Settings:
    """Find, read and validate the config; apply --db and the environment."""
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
    return _Loader(path, base_dir).settings(data, db_url, env, here, fingerprint)


class _Loader(_PipelineReader):
    """Walks the parsed TOML once, turning it into Settings or a ConfigError."""

    def settings(
        self,
        data: dict[str, Any],
        db_url: str | None,
        environ: Mapping[str, str],
        cwd: Path,
        fingerprint: str,
    ) -> Settings:
        top = self.table(data, "", _TOP_KEYS)
        orch = self.table(top.get("orchestrator", {}), "orchestrator", _ORCHESTRATOR_KEYS)
        pools = read_pools(self, top.get("pools"))
        self.pool_names = frozenset(pools)
        defaults = self.defaults(top.get("defaults", {}))
        pipelines = self.pipelines(top.get("pipelines", {}), defaults)

        def get(name: str) -> tuple[object, str]:
            return orch.get(name), _key("orchestrator", name)

        database = self.database(orch, db_url, environ, cwd)
        value, key = get("affinity")
        affinity = cast(
            Affinity, "host" if value is None else self.choice(value, key, ("host", "any"))
        )
        value, key = get("env_deny")
        env_deny = () if value is None else self.string_list(value, key)
        value, key = get("env_file")
        env_file = None if value is None else self.file_path(value, key)

        def pathed(name: str, default: str) -> Path:
            value, key = get(name)
            return self.file_path(default if value is None else value, key)

        def num(name: str, default: float, *, low: float, low_inclusive: bool = True) -> float:
            value, key = get(name)
            if value is None:
                return default
            return self.number(value, key, low=low, low_inclusive=low_inclusive)

        def int_(name: str, default: int) -> int:
            value, key = get(name)
            return default if value is None else self.integer(value, key, 1)

        return Settings(
            config_path=self.file,
            base_dir=self.base_dir,
            database_url=database,
            workspace_root=pathed("workspace_root", "tasks"),
            state_root=pathed("state_root", "state"),
            lock_file=pathed("lock_file", "orchestrator.lock"),
            lease_seconds=num("lease_seconds", 900.0, low=0.0, low_inclusive=False),
            retry_interval=num("retry_interval", 60.0, low=0.0),
            max_interrupts=int_("max_interrupts", 3),
            busy_timeout=num("busy_timeout", 30.0, low=0.0),
            reconnect_seconds=num("reconnect_seconds", 60.0, low=0.0),
            output_cap_bytes=int_("output_cap_bytes", 1_048_576),
            kill_grace_seconds=num("kill_grace_seconds", 5.0, low=0.0),
            affinity=affinity,
            env_deny=env_deny,
            pipelines=types.MappingProxyType(pipelines),
            fingerprint=fingerprint,
            hooks=parse_hooks(self, top.get("hooks")),
            env_file=env_file,
            pools=types.MappingProxyType(pools),
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
