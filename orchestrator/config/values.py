"""Validation helpers: one TOML value of a known shape, or `FILE: dotted.key: problem`.

Every mistake names its dotted key as TOML spells it, so the user can find
the line without counting tables.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn, cast

from orchestrator.config.files import _absolute
from orchestrator.config.schema import dotted
from orchestrator.errors import ConfigError


def _show(value: object) -> str:
    """A value as the user wrote it in TOML, short enough for one error line."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class _ValueReader:
    """Reads one TOML value of a known shape, or fails naming its dotted key.

    It is the `Checks` every Section's kinds read through; the stage,
    pipeline and settings readers build on it.
    """

    def __init__(self, path: Path | None, base_dir: Path) -> None:
        self.file = path
        self.base_dir = base_dir
        # What each Section's top-level table read to (`names`: a stage's pool).
        self.read_tables: dict[str, Any] = {}
        # Extension Sections' own tables (`Section.extension`), by table name.
        self.extras: dict[str, object] = {}

    def names(self, table: str) -> frozenset[str]:
        found = self.read_tables.get(table)
        return frozenset(found) if isinstance(found, Mapping) else frozenset()

    def fail(self, key: str, problem: str) -> NoReturn:
        where = str(self.file) if self.file is not None else "configuration"
        raise ConfigError(f"{where}: {key}: {problem}")

    def expected(self, key: str, what: str, value: object) -> NoReturn:
        self.fail(key, f"expected {what}, got {_show(value)}")

    def table(self, value: object, key: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.expected(key, "a table", value)
        unknown = [name for name in value if name not in allowed]
        if unknown:
            import difflib  # only on the error path

            name = unknown[0]
            close = [a for a in allowed if a.startswith(name) or name.startswith(a)]
            close = close or difflib.get_close_matches(name, allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            self.fail(
                dotted(key, name),
                f"unknown key{hint}; allowed: {', '.join(allowed)}",
            )
        return cast(dict[str, Any], value)

    def integer(self, value: object, key: str, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.expected(key, f"an integer >= {minimum}", value)
        return value

    def number(
        self,
        value: object,
        key: str,
        *,
        low: float,
        high: float | None = None,
        low_inclusive: bool = True,
    ) -> float:
        """A finite float; TOML's inf and nan never make sense as limits here."""
        if high is not None:
            what = f"a number in {'[' if low_inclusive else '('}{low:.10g}, {high:.10g}]"
        else:
            what = f"a number {'>=' if low_inclusive else '>'} {low:g}"
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.expected(key, what, value)
        try:
            number = float(value)
        except OverflowError:  # tomllib's integers have no size limit
            self.expected(key, what, value)
        ok = math.isfinite(number) and (number >= low if low_inclusive else number > low)
        if not ok or (high is not None and number > high):
            self.expected(key, what, value)
        return number

    def boolean(self, value: object, key: str) -> bool:
        if not isinstance(value, bool):
            self.expected(key, "true or false", value)
        return value

    def string(self, value: object, key: str) -> str:
        if not isinstance(value, str) or value == "":
            self.expected(key, "a non-empty string", value)
        if "\x00" in value:
            self.fail(key, "NUL characters are not allowed")
        return value

    def choice(self, value: object, key: str, choices: tuple[str, ...]) -> str:
        if not isinstance(value, str) or value not in choices:
            self.expected(key, " or ".join(repr(c) for c in choices), value)
        return value

    def file_path(self, value: object, key: str) -> Path:
        return _absolute(Path(self.string(value, key)), self.base_dir)

    def argv(self, value: object, key: str) -> tuple[str, ...]:
        """Commands are never run through a shell unless the user writes one."""
        if isinstance(value, str):
            self.fail(
                key,
                f'got the string {_show(value)}; use an argv list, e.g. ["sh", "-c", "..."]',
            )
        if not isinstance(value, list) or not value:
            self.expected(key, "a non-empty list of strings", value)
        for index, item in enumerate(value):
            if not isinstance(item, str):
                self.expected(f"{key}[{index}]", "a string", item)
            if "\x00" in item:
                self.fail(f"{key}[{index}]", "NUL characters are not allowed")
        if value[0] == "":
            self.fail(f"{key}[0]", "the program name must not be empty")
        return tuple(value)

    def string_list(self, value: object, key: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            self.expected(key, "a list of strings", value)
        return tuple(self.string(item, f"{key}[{i}]") for i, item in enumerate(value))

    def env(self, value: object, key: str) -> dict[str, str]:
        table = cast(dict[str, Any], value) if isinstance(value, dict) else None
        if table is None:
            self.expected(key, 'a table of NAME = "value" strings', value)
        result: dict[str, str] = {}
        for name, item in table.items():
            item_key = dotted(key, name)
            if name == "" or "=" in name or "\x00" in name:
                self.fail(item_key, "not a valid environment variable name")
            if not isinstance(item, str):
                self.expected(item_key, "a string", item)
            if "\x00" in item:
                self.fail(item_key, "NUL characters are not allowed")
            result[name] = item
        return result

    def exit_statuses(self, value: object, key: str) -> frozenset[int]:
        what = "a list of exit statuses (integers 0-255) that includes 0"
        if not isinstance(value, list):
            self.expected(key, what, value)
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item <= 255:
                self.expected(key, what, value)
        if 0 not in value:
            self.expected(key, what, value)
        return frozenset(value)
