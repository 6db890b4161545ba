"""The domain core imports only the standard library and orchestrator.errors."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import orchestrator.domain

DOMAIN = Path(orchestrator.domain.__file__).parent
ALLOWED_OWN = ("orchestrator.errors", "orchestrator.domain")


def imported_modules(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def offending(names: list[str]) -> list[str]:
    return [
        name
        for name in names
        if not name.startswith(ALLOWED_OWN)
        and name != "__future__"
        and name.split(".")[0] not in sys.stdlib_module_names
    ]


def test_domain_has_modules() -> None:
    assert {p.stem for p in DOMAIN.glob("*.py")} >= {"verdict", "plateau", "pipeline", "decide"}


def test_domain_imports_only_stdlib_and_errors() -> None:
    offenders = [
        f"{path.name}: {name}"
        for path in sorted(DOMAIN.glob("*.py"))
        for name in offending(imported_modules(path))
    ]
    assert offenders == []


def test_the_check_catches_outside_imports(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import json\nimport sqlalchemy\nfrom click import echo\n"
        "from orchestrator.storage import repo\nfrom orchestrator.errors import ConfigError\n"
    )
    assert offending(imported_modules(bad)) == ["sqlalchemy", "click", "orchestrator.storage"]
