"""Modules of one folder that were tied together stay untied.

Each pair is (lower, upper): the upper one may import the lower one, never the other way, directly or through
other modules of the same folder (a path through another folder is the layers' matter, see import_graph.py).
"""

from __future__ import annotations

import pytest

from tests import import_graph

PAIRS = [
    ("transports.process", "transports.stdio"),
    ("auth.jose", "auth.flow"),
    ("types.content", "types.html"),
]


def _reach(start: str, folder: str) -> dict[str, str]:
    """Every module of ``folder`` that ``start`` imports, directly or not, each with the module that imports it."""
    inside: dict[str, list[str]] = {}
    for edge in import_graph.edges():
        if import_graph.folder_of(edge.source) == folder and import_graph.folder_of(edge.target) == folder:
            inside.setdefault(edge.source, []).append(edge.target)
    seen: dict[str, str] = {}
    todo = [start]
    while todo:
        here = todo.pop()
        for target in inside.get(here, []):
            if target not in seen and target != start:
                seen[target] = here
                todo.append(target)
    return seen


@pytest.mark.parametrize("pair", PAIRS, ids=["-".join(pair) for pair in PAIRS])
def test_the_lower_module_never_imports_the_upper_one(pair: tuple[str, str]) -> None:
    lower, upper = pair
    reached = _reach(lower, import_graph.folder_of(lower))
    path = [upper]
    while path[-1] in reached:
        path.append(reached[path[-1]])
    assert upper not in reached, f"{lower} imports {upper}: " + " -> ".join(reversed(path))
