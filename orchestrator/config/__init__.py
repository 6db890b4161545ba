"""`orchestrator.toml` → frozen Settings.

Everything is validated up front, so the engine can trust the shapes it is
given, and every mistake is reported as `FILE: dotted.key: problem` (exit 78):
a typo in a cron-driven config must be found by `doctor` or the first tick,
not an hour later when an agent finishes.

The module stays on the standard library (plus the pure domain): a tick that
finds its lock busy loads the config and must exit before SQLAlchemy or click
would have been imported.
"""

from __future__ import annotations

from orchestrator.config.files import config_fingerprint as config_fingerprint
from orchestrator.config.files import find_config as find_config
from orchestrator.config.files import resolve_database_url as resolve_database_url
from orchestrator.config.loader import _Loader as _Loader
from orchestrator.config.loader import load_settings as load_settings
from orchestrator.config.model import COMPLETE as COMPLETE
from orchestrator.config.model import CONFIG_ENV as CONFIG_ENV
from orchestrator.config.model import DB_URL_ENV as DB_URL_ENV
from orchestrator.config.model import DEFAULT_CONFIG_NAME as DEFAULT_CONFIG_NAME
from orchestrator.config.model import DEFAULT_DATABASE as DEFAULT_DATABASE
from orchestrator.config.model import Affinity as Affinity
from orchestrator.config.model import PipelineConfig as PipelineConfig
from orchestrator.config.model import Settings as Settings
from orchestrator.config.model import StageConfig as StageConfig
from orchestrator.config.model import StdinMode as StdinMode
