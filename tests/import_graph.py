"""The project's import graph, read from the source (ast): every module under
`undobench_gym/`, named by its path.

Used by tests/test_architecture.py; `python -m tests.import_graph` prints the layer
violations, cycles and function-level imports it finds.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"undobench_gym": "undobench_gym"}

#: Bottom to top: a module may import its own layer and the layers below, never above. Each
#: layer is the folder of the same name under `undobench_gym/`.
LAYERS = ("contract", "services", "core", "agents", "evaluation", "harness")


def layer_of(module: str) -> str:
    """The layer folder a module sits in; the package root (registration, the public
    names) counts as core."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in LAYERS:
        return parts[1]
    return "core"


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    in_function: bool
    type_checking: bool


def modules() -> dict[str, Path]:
    """Every project module, by its installed name."""
    out = {}
    for folder, package in FOLDERS.items():
        base = ROOT / folder
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(base).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([package, *parts])] = path
    return out


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if _is_package(path) else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _walk(
    tree: ast.AST, in_function: bool = False, type_checking: bool = False
) -> Iterator[tuple[ast.AST, bool, bool]]:
    for child in ast.iter_child_nodes(tree):
        func = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
        tc = type_checking or (
            isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)
        )
        yield child, in_function, type_checking
        yield from _walk(child, func, tc)


def imports(known: dict[str, Path] | None = None) -> list[Import]:
    """Every import of a project module by a project module."""
    known = known if known is not None else modules()
    out = []
    for module, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        for node, in_function, type_checking in _walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, path, node)
                # `from pkg import sub` imports the sub-module when there is one.
                subs = [f"{base}.{a.name}" for a in node.names]
                targets = [s for s in subs if s in known] or [base]
            for target in targets:
                if target.split(".")[0] != "undobench_gym" or target == module:
                    continue
                while target not in known and "." in target:
                    target = target.rsplit(".", 1)[0]
                out.append(Import(module, target, node.lineno, in_function, type_checking))
    return out


def upward(edges: list[Import]) -> list[Import]:
    rank = {name: i for i, name in enumerate(LAYERS)}
    return [e for e in edges if rank[layer_of(e.imported)] > rank[layer_of(e.importer)]]


def cycles(edges: list[Import]) -> list[list[str]]:
    """Strongly connected components (more than one module) of the module-level graph."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if not (e.in_function or e.type_checking):
            graph.setdefault(e.importer, set()).add(e.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan; the graph is small enough for recursion
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


if __name__ == "__main__":
    edges = imports()
    for e in upward(edges):
        print(
            f"UP {e.importer}:{e.line} ({layer_of(e.importer)}) -> "
            f"{e.imported} ({layer_of(e.imported)})"
        )
    for c in cycles(edges):
        print("CYCLE", " ".join(c))
    for e in edges:
        if e.in_function:
            print(f"LAZY {e.importer}:{e.line} -> {e.imported}")
