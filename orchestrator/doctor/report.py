"""What a check says: its level, its one line, and the report's exit code.

The families of checks and the agents' checks all return these, so the CLI
prints and judges them in one way.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from orchestrator.errors import ConfigError


class Level(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Check:
    level: Level
    name: str
    detail: str


@dataclass(frozen=True)
class DoctorReport:
    checks: tuple[Check, ...]
    config_loaded: bool

    @property
    def failed(self) -> bool:
        return any(check.level is Level.FAIL for check in self.checks)

    @property
    def exit_code(self) -> int:
        if not self.config_loaded:
            return ConfigError.exit_code
        return 1 if self.failed else 0
