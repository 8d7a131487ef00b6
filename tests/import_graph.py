"""The import graph of the mcpcall package: its circles, its upward imports and its biggest modules.

    python tests/import_graph.py            # the report
    python tests/import_graph.py --edges    # and every import, module by module

Read from the source with ``ast`` (nothing is imported), every ``import`` counted, at the top of a module or
inside a function (a lazy import is marked ``lazy``; it still ties the two modules together), except those under
``if TYPE_CHECKING:``, which never run. A module is named by its dotted path without the leading ``mcpcall.``;
a package by its folder (``auth``), which stands for its ``__init__.py``.

``LAYERS`` says which layer each module belongs to, bottom first; a module may import its own layer and the
layers below. An import of a higher layer is an *upward* import. A *circle* is a strongly connected component
of the graph (modules that reach each other through imports); one that spans two folders is reported as such.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

PACKAGE = Path(__file__).resolve().parents[1] / "mcpcall"

# Bottom first. A prefix names a module or a folder (every module under it); the longest prefix that matches wins.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # callbacks (the callbacks thread, log_later) imports nothing of mcpcall, and the scheduler defers its records to it.
    ("ground", ("_version", "errors", "urls", "jsonrpc", "sse", "headers", "patterns", "schema", "_condition",
                "forking", "protocol", "scheduler", "callbacks", "types", "pieces")),
    ("transports", ("transports",)),
    ("dispatcher", ("dispatcher",)),
    ("session", ("session",)),
    ("client", ("client", "notebook")),  # notebook: which clients a cell made; it imports nothing of mcpcall
    ("auth", ("auth",)),
    ("config", ("config",)),
    ("registry", ("registry",)),
    ("integrations", ("integrations",)),  # the agent frameworks: registry, config, client and below
    ("top", ("cli", "demo_server", "__main__", "")),  # "" is the package itself (mcpcall/__init__.py)
]


class Edge(NamedTuple):
    source: str
    target: str
    lazy: bool
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in path.parts}


def _under_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _resolve(name: str, known: set[str]) -> str | None:
    """The known module a dotted name (without ``mcpcall.``) refers to: itself or its nearest known parent."""
    while name not in known and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in known else None


def edges() -> list[Edge]:
    found = modules()
    known = set(found)
    result: list[Edge] = []
    for source, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name[len("mcpcall."):] if alias.name != "mcpcall" else ""
                           for alias in node.names if alias.name == "mcpcall" or alias.name.startswith("mcpcall.")]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = source.split(".") if source else []
                    base = base if is_package else base[:-1]
                    base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                    stem = ".".join([*base, *(node.module.split(".") if node.module else [])])
                elif node.module and (node.module == "mcpcall" or node.module.startswith("mcpcall.")):
                    stem = node.module[len("mcpcall."):] if node.module != "mcpcall" else ""
                else:
                    continue
                # `from .x import y`: y may itself be a module (a submodule of x).
                targets = [f"{stem}.{alias.name}".lstrip(".") if _resolve(f"{stem}.{alias.name}".lstrip("."), known)
                           == f"{stem}.{alias.name}".lstrip(".") else stem for alias in node.names]
            else:
                continue
            if _under_type_checking(node, parents):
                continue
            lazy = not isinstance(parents.get(node), ast.Module)
            for target in targets:
                resolved = _resolve(target, known)
                if resolved is not None and resolved != source:
                    result.append(Edge(source, resolved, lazy, node.lineno))
    return result


def layer_of(module: str) -> int:
    """The index in LAYERS of the module's layer: the layer of the longest prefix that names it."""
    best, best_len = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            names_it = module == prefix or (prefix != "" and module.startswith(prefix + "."))
            if names_it and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    if best < 0:
        raise SystemExit(f"import_graph: module {module!r} is in no layer: add it to LAYERS")
    return best


def folder_of(module: str) -> str:
    path = modules()[module]
    return str(path.parent.relative_to(PACKAGE.parent))


def circles(graph_edges: Iterable[Edge]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    graph: dict[str, set[str]] = {name: set() for name in modules()}
    for edge in graph_edges:
        graph[edge.source].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found, key=lambda c: (-len(c), c))


def upward(graph_edges: Iterable[Edge]) -> list[Edge]:
    return [edge for edge in graph_edges if layer_of(edge.target) > layer_of(edge.source)]


def report(show_edges: bool = False) -> str:
    graph_edges = edges()
    found = modules()
    lines = [(f"mcpcall: {len(found)} modules, {sum(len(p.read_text().splitlines()) for p in found.values()):,} lines, "
             f"{len({(e.source, e.target) for e in graph_edges})} imports between them")]
    rings = circles(graph_edges)
    lines.append(f"circles: {len(rings)} ({sum(1 for r in rings if len({folder_of(m) for m in r}) > 1)} span folders)")
    for ring in rings:
        folders = sorted({folder_of(m) for m in ring})
        lines.append(f"  {len(ring)} modules in {', '.join(folders)}: {', '.join(m or '(mcpcall)' for m in ring)}")
    ups = upward(graph_edges)
    lines.append(f"upward imports: {len({(e.source, e.target) for e in ups})}")
    seen: set[tuple[str, str]] = set()
    for edge in sorted(ups):
        if (edge.source, edge.target) in seen:
            continue
        seen.add((edge.source, edge.target))
        lines.append(f"  {edge.source or '(mcpcall)'} ({LAYERS[layer_of(edge.source)][0]}) -> {edge.target or '(mcpcall)'} "
                     f"({LAYERS[layer_of(edge.target)][0]}){' lazy' if edge.lazy else ''}, line {edge.line}")
    sizes = sorted(((len(p.read_text().splitlines()), name) for name, p in found.items()), reverse=True)[:10]
    lines.append("biggest modules: " + ", ".join(f"{name or '(mcpcall)'} {size}" for size, name in sizes))
    if show_edges:
        lines.append("imports:")
        for edge in sorted(set(graph_edges)):
            lines.append(f"  {edge.source or '(mcpcall)'} -> {edge.target or '(mcpcall)'}{' lazy' if edge.lazy else ''} "
                         f"(line {edge.line})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edges", action="store_true", help="list every import too")
    args = parser.parse_args(argv)
    print(report(args.edges))
    return 0


if __name__ == "__main__":
    sys.exit(main())
