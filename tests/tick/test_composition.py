"""The tick is built by composition: no class in `orchestrator/tick/`
inherits from another class of the project, exceptions, protocols and data
classes aside. Read from the source with `ast`, so a new module is checked
the day it is added."""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path

import orchestrator.tick

TICK = Path(orchestrator.tick.__file__).parent
EXEMPT_BASES = {"Exception", "BaseException", "Protocol", "typing.Protocol"}


def _imports(tree: ast.Module) -> dict[str, str]:
    """Each name a module binds by import, to what it stands for."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.partition(".")[0]] = alias.name
    return names


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Subscript):  # Generic[T], Protocol[T]
        return _dotted(node.value)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def _is_dataclass_def(node: ast.ClassDef) -> bool:
    return any(
        (_dotted(d.func if isinstance(d, ast.Call) else d) or "").endswith("dataclass")
        for d in node.decorator_list
    )


def inheritance_problems(folder: Path) -> tuple[list[str], set[str]]:
    """(each class of `folder` with a project base it may not have, the classes seen)."""
    trees = {path: ast.parse(path.read_text(), str(path)) for path in sorted(folder.glob("*.py"))}
    local: dict[str, ast.ClassDef] = {}  # "orchestrator.tick.mod.Name" -> its definition
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                local[f"orchestrator.tick.{path.stem}.{node.name}"] = node

    def exempt(qualified: str) -> bool:
        module, _, name = qualified.rpartition(".")
        try:
            base = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            node = local.get(qualified)  # a class of the folder not importable as such
            return node is not None and (
                _is_dataclass_def(node) or any(_dotted(b) in EXEMPT_BASES for b in node.bases)
            )
        return (
            (isinstance(base, type) and issubclass(base, BaseException))
            or bool(getattr(base, "_is_protocol", False))
            or dataclasses.is_dataclass(base)
        )

    problems: list[str] = []
    for path, tree in trees.items():
        imported = _imports(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            for base in node.bases:
                name = _dotted(base)
                if name is None:
                    continue
                head, _, rest = name.partition(".")
                if head in imported:
                    qualified = imported[head] + (f".{rest}" if rest else "")
                elif f"orchestrator.tick.{path.stem}.{head}" in local:
                    qualified = f"orchestrator.tick.{path.stem}.{name}"
                else:
                    continue  # a builtin: Exception, object
                if qualified.startswith("orchestrator.") and not exempt(qualified):
                    problems.append(f"{path.name}: {node.name}({name})")
    return problems, {qualified.rpartition(".")[2] for qualified in local}


def test_no_tick_class_inherits_from_a_project_class() -> None:
    problems, seen = inheritance_problems(TICK)
    assert {"Ticker", "Claimer", "Recorder", "Recovery", "Scheduler", "TickRun"} <= seen
    assert problems == []


def test_the_check_sees_a_chain_of_ancestors(tmp_path: Path) -> None:
    (tmp_path / "first.py").write_text("class Room:\n    pass\n")
    (tmp_path / "second.py").write_text(
        "from dataclasses import dataclass\n"
        "from orchestrator.errors import OrchestratorError\n"
        "from orchestrator.tick.first import Room\n"
        "from orchestrator.tick.progress import Progress\n"
        "from orchestrator.ext.model import TickReport\n"
        "class Next(Room):\n    pass\n"
        "class Failed(OrchestratorError):\n    pass\n"
        "class Shown(Progress):\n    pass\n"
        "@dataclass\nclass Report(TickReport):\n    pass\n"
        "class Plain(Exception):\n    pass\n"
    )
    problems, _ = inheritance_problems(tmp_path)
    assert problems == ["second.py: Next(Room)"]
