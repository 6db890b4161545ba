"""The idle path's copy of the schema is the one tables.py defines.

tick/idle/ cannot import the tables (it must stay standard library only),
so its `IDLE_REVISION` and `KNOWN_SCHEMA` are generated into its schema.py; these tests
fail while that copy is stale, and show the generator can tell.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from orchestrator.storage import idle_schema
from orchestrator.storage.schema import HEAD
from orchestrator.storage.tables import metadata
from orchestrator.tick.idle import schema


def test_the_generated_part_of_idle_py_is_up_to_date() -> None:
    text = idle_schema.IDLE_MODULE.read_text(encoding="utf-8")
    assert idle_schema.regenerated(text) == text, f"stale: run `{idle_schema.COMMAND}`"
    assert idle_schema.main([]) == 0


def test_what_idle_py_holds_is_what_the_tables_say() -> None:
    assert schema.IDLE_REVISION == HEAD
    assert set(schema.KNOWN_SCHEMA) == {*metadata.tables, "alembic_version"}
    for name, table in metadata.tables.items():
        assert schema.KNOWN_SCHEMA[name] == {column.name for column in table.columns}


def test_a_column_added_to_the_tables_makes_it_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    text = idle_schema.IDLE_MODULE.read_text(encoding="utf-8")
    real = idle_schema.known_schema()
    grown = {**real, "ticks": (*real["ticks"], "new_column")}
    monkeypatch.setattr(idle_schema, "known_schema", lambda: grown)
    fresh = idle_schema.regenerated(text)
    assert fresh != text
    # What --write would put there is valid Python holding the new column,
    # and leaves the rest of the module as it was.
    assert '"new_column",' in idle_schema.generated_part(fresh)
    ast.parse(fresh)
    assert fresh.replace(idle_schema.generated_part(fresh), "") == text.replace(
        idle_schema.generated_part(text), ""
    )


def test_write_brings_a_stale_copy_up_to_date(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    current = idle_schema.IDLE_MODULE.read_text(encoding="utf-8")
    copy = tmp_path / "idle.py"
    copy.write_text(
        current.replace(f'IDLE_REVISION = "{HEAD}"', 'IDLE_REVISION = "0000"'), encoding="utf-8"
    )
    monkeypatch.setattr(idle_schema, "IDLE_MODULE", copy)
    assert idle_schema.main([]) == 1
    assert idle_schema.main(["--write"]) == 0
    assert copy.read_text(encoding="utf-8") == current
    assert idle_schema.main([]) == 0
