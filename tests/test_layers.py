"""The package's folders form layers, and only storage speaks SQL.

`tests/test_structure.py` sees module cycles; two folders can import each
other through different modules without any module cycle, and then neither
folder can be understood (or moved) without the other. So the graph here is
drawn between folders (`orchestrator/<folder>/`, a loose module counts as its
own folder), from the source with `ast`: imports at module level and lazy
ones (inside a function) alike, each reported as which it is; imports under
`if TYPE_CHECKING:` never run and are left out.

Today's exceptions are listed, and each list may only shrink: the tests fail
on an exception not listed, and on a listed one that no longer exists (so
whoever removes one deletes its line, and the lists stay a true picture).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import orchestrator

PACKAGE = Path(orchestrator.__file__).parent
ROOT = "orchestrator"  # the package's own __init__.py, as a node

# Lowest first: a folder may import its own layer and the layers below it.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({ROOT, "domain", "errors", "safefs", "pidfd", "locking", "testing", "templates"}),
    frozenset({"storage", "runner", "workspace", "config", "guards"}),
    frozenset({"agents", "events"}),
    frozenset({"ext"}),
    frozenset({"tick", "features"}),
    frozenset({"compose"}),
    frozenset({"views", "api"}),
    frozenset({"cli", "web", "doctor", "scaffold", "mcp", "__main__"}),
)

# Pairs of folders that import each other today.
ALLOWED_CYCLES: frozenset[frozenset[str]] = frozenset(
    frozenset(pair)
    for pair in (
        ("agents", "config"),
        ("config", "events"),
        ("config", "features"),
        ("config", "guards"),
        ("config", "workspace"),
    )
)

# Loops of more than two folders today, once the pairs above and the upward
# imports below are taken out: the folders of each (mcp's command module
# imports cli, which reaches mcp lazily through scaffold's `init --mcp`).
ALLOWED_RINGS: frozenset[frozenset[str]] = frozenset(
    {frozenset({"cli", "doctor", "mcp", "scaffold"})}
)

# Imports up the layers today (importer, imported).
ALLOWED_UPWARD: frozenset[tuple[str, str]] = frozenset(
    {
        ("config", "agents"),
        ("config", "events"),
        ("config", "features"),
        ("tick", "mcp"),
    }
)

# What builds SQL: SQLAlchemy's query constructors and the tables themselves.
QUERY_BUILDERS = frozenset(
    {
        "and_",
        "bindparam",
        "case",
        "cast",
        "column",
        "delete",
        "distinct",
        "exists",
        "false",
        "func",
        "insert",
        "literal",
        "literal_column",
        "not_",
        "null",
        "or_",
        "select",
        "table",
        "text",
        "true",
        "tuple_",
        "union",
        "union_all",
        "update",
    }
)

# Modules outside storage/ that build SQL today (package-relative paths).
ALLOWED_SQL: frozenset[str] = frozenset(
    {
        "agents/budget.py",
        "agents/context_file.py",
        "agents/report.py",
    }
)


@dataclass(frozen=True)
class Edge:
    """One import of another folder: where it is and whether it runs at
    module level ("top") or only when a function is called ("lazy")."""

    source: str
    target: str
    module: str
    line: int
    kind: str

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} ({self.module}:{self.line}, {self.kind})"


def _nodes(tree: ast.AST, *, lazy: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    """Every node that runs, with whether it runs only inside a function."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            for other in child.orelse:
                yield other, lazy
                yield from _nodes(other, lazy=lazy)
            continue
        inner = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield child, inner
        yield from _nodes(child, lazy=inner)


def _folder_of(relative: Path) -> str:
    if len(relative.parts) > 1:
        return relative.parts[0]
    return ROOT if relative.name == "__init__.py" else relative.stem


def _folders() -> set[str]:
    return {_folder_of(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")}


def _targets(node: ast.AST, package: str, folders: set[str]) -> list[str]:
    """The folders an import statement names (`from orchestrator import x`
    names folder x when there is one, else the package itself)."""
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*anchor, base] if base else anchor)
        names = [f"{base}.{alias.name}" for alias in node.names] if base == ROOT else [base]
    found: list[str] = []
    for name in names:
        parts = name.split(".")
        if parts[0] != ROOT:
            continue
        found.append(parts[1] if len(parts) > 1 and parts[1] in folders else ROOT)
    return found


@cache
def folder_edges() -> tuple[Edge, ...]:
    """Every import of another folder (read once per test run)."""
    folders = _folders()
    edges: list[Edge] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        parts = (ROOT, *relative.with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        source = _folder_of(relative)
        for node, lazy in _nodes(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _targets(node, package, folders):
                if target != source:
                    line = getattr(node, "lineno", 0)
                    edges.append(Edge(source, target, module, line, "lazy" if lazy else "top"))
    return tuple(edges)


def folder_graph(edges: tuple[Edge, ...]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    return graph


def components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def mutual_pairs(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    return {frozenset((a, b)) for a, targets in graph.items() for b in targets if a in graph[b]}


def _rank(folder: str) -> int:
    for rank, layer in enumerate(LAYERS):
        if folder in layer:
            return rank
    raise AssertionError(f"folder {folder!r} is in no layer: add it to LAYERS")


def _show(edges: tuple[Edge, ...], found: set[frozenset[str]] | set[tuple[str, str]]) -> str:
    """The import sites behind `found`: folder pairs (either way), or
    (importer, imported)."""
    return "\n".join(
        str(e)
        for e in edges
        if (e.source, e.target) in found or frozenset((e.source, e.target)) in found
    )


def test_every_folder_has_a_layer() -> None:
    for folder in _folders():
        _rank(folder)


def test_no_folder_cycle_beyond_the_listed_ones() -> None:
    edges = folder_edges()
    graph = folder_graph(edges)
    pairs = mutual_pairs(graph)
    new, gone = pairs - ALLOWED_CYCLES, ALLOWED_CYCLES - pairs
    assert not new, f"folders that now import each other:\n{_show(edges, new)}"
    assert not gone, (
        f"no longer a cycle, delete it from ALLOWED_CYCLES: {sorted(map(sorted, gone))}"
    )
    # Longer cycles, with the listed pairs and upward imports taken out
    # (tick imports mcp lazily, and mcp reaches tick through api: a loop
    # that exists exactly as long as its upward import is listed).
    untangled = {
        a: {
            b
            for b in targets
            if frozenset((a, b)) not in ALLOWED_CYCLES and (a, b) not in ALLOWED_UPWARD
        }
        for a, targets in graph.items()
    }
    rings = {frozenset(ring) for ring in components(untangled)}
    assert not rings - ALLOWED_RINGS, f"new loops of folders: {sorted(map(sorted, rings))}"
    assert not ALLOWED_RINGS - rings, "a listed ring is gone: delete it from ALLOWED_RINGS"


def test_no_import_up_the_layers_beyond_the_listed_ones() -> None:
    edges = folder_edges()
    upward = {(e.source, e.target) for e in edges if _rank(e.target) > _rank(e.source)}
    new, gone = upward - ALLOWED_UPWARD, ALLOWED_UPWARD - upward
    assert not new, f"imports up the layers:\n{_show(edges, new)}"
    assert not gone, f"no longer imported, delete it from ALLOWED_UPWARD: {sorted(gone)}"


def test_the_graph_tells_top_level_from_lazy_imports() -> None:
    edges = folder_edges()
    # views/gate.py imports workspace at module level; cli imports views in a function.
    assert any(e.module == "orchestrator.views.gate" and e.kind == "top" for e in edges)
    assert any(
        e.module.startswith("orchestrator.cli.") and e.target == "views" and e.kind == "lazy"
        for e in edges
    )


def test_the_cycle_checks_find_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c", "a"}, "c": {"a"}, "d": {"a"}}
    assert components(graph) == [["a", "b", "c"]]
    assert mutual_pairs(graph) == {frozenset(("a", "b"))}


def _builds_sql(tree: ast.AST) -> list[str]:
    """What in a module builds SQL: a query constructor or the tables
    imported, or a table's column (`<table>.c.<name>`) used."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            module = node.module
            names = {alias.name for alias in node.names}
            if module.split(".")[0] == "sqlalchemy" and names & QUERY_BUILDERS:
                found.append(f"line {node.lineno}: from {module} import {sorted(names)}")
            if module.endswith("storage.tables") or (
                module.endswith("storage") and "tables" in names
            ):
                found.append(f"line {node.lineno}: the tables")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "sqlalchemy" or alias.name.endswith("storage.tables"):
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "c"
        ):
            found.append(f"line {node.lineno}: a column, .c.{node.attr}")
    return found


def _may_build_sql(relative: Path) -> bool:
    parts = relative.parts
    return parts[0] == "storage" or (
        len(parts) == 3 and parts[0] == "features" and parts[2] == "store.py"
    )


def sql_outside_storage() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if _may_build_sql(relative):
            continue
        sites = _builds_sql(ast.parse(path.read_text(encoding="utf-8")))
        if sites:
            found[relative.as_posix()] = sites
    return found


def test_only_storage_builds_sql_beyond_the_listed_modules() -> None:
    found = sql_outside_storage()
    new = {path: sites for path, sites in found.items() if path not in ALLOWED_SQL}
    gone = ALLOWED_SQL - set(found)
    assert not new, (
        f"SQL built outside storage/ (move the query to storage/reads/ or storage/repo/): {new}"
    )
    assert not gone, f"no longer builds SQL, delete it from ALLOWED_SQL: {sorted(gone)}"


def test_the_sql_check_sees_a_query() -> None:
    source = (
        "from sqlalchemy import Connection, select\n"
        "from orchestrator.storage import repo\n"
        "def f(conn: Connection) -> object:\n"
        "    return conn.execute(select(repo.tasks.c.slug))\n"
    )
    found = _builds_sql(ast.parse(source))
    assert len(found) == 2
    assert _builds_sql(ast.parse("from sqlalchemy import Connection, Engine\n")) == []
