"""The layers hold: no import runs from a lower layer to a higher one, and no circle spans two folders.

The graph is read from the source by ``tests/import_graph.py`` (``python tests/import_graph.py`` prints it);
its ``LAYERS`` says which layer each module belongs to.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import import_graph

def _edges() -> list[import_graph.Edge]:
    return import_graph.edges()


def _spanning(edges: list[import_graph.Edge]) -> list[list[str]]:
    return [ring for ring in import_graph.circles(edges) if len({import_graph.folder_of(m) for m in ring}) > 1]


def _shown(edge: import_graph.Edge) -> str:
    return f"{edge.source or '(mcpcall)'} -> {edge.target or '(mcpcall)'}{' (lazy)' if edge.lazy else ''}, line {edge.line}"


def test_no_import_runs_upward() -> None:
    ups = import_graph.upward(_edges())
    assert not ups, "imports of a higher layer (move the piece down, or fix LAYERS in tests/import_graph.py):\n  " + \
        "\n  ".join(_shown(edge) for edge in ups)


def test_no_circle_spans_two_folders() -> None:
    rings = _spanning(_edges())
    assert not rings, "circles across folders:\n  " + "\n  ".join(", ".join(m or "(mcpcall)" for m in ring) for ring in rings)


def test_every_module_has_a_layer() -> None:
    for module in import_graph.modules():
        import_graph.layer_of(module)  # raises SystemExit for a module in no layer


def test_every_folder_is_a_package() -> None:
    folders = {path.parent for path in import_graph.PACKAGE.rglob("*.py") if "__pycache__" not in path.parts}
    missing = sorted(str(folder.relative_to(import_graph.PACKAGE.parent)) for folder in folders
                     if not (folder / "__init__.py").is_file())
    assert not missing, f"folders without __init__.py (namespace packages): {missing}"


def test_each_package_docstring_says_its_job_and_what_it_may_import() -> None:
    import ast

    for init in sorted(import_graph.PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert doc and "may import" in doc, f"{init.relative_to(import_graph.PACKAGE.parent)}: say its job and what it may import"


@pytest.fixture
def fake_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small mcpcall: ground ``urls``, ``transports.http`` and ``config``, read by the same functions."""
    root = tmp_path / "mcpcall"
    for folder in (root, root / "transports", root / "config"):
        folder.mkdir()
        (folder / "__init__.py").write_text('"""x"""\n')
    (root / "urls.py").write_text("import re\n")
    (root / "transports" / "http.py").write_text("from ..urls import redact_url\n")
    (root / "config" / "files.py").write_text("from ..transports.http import x\n")
    monkeypatch.setattr(import_graph, "PACKAGE", root)
    return root


def test_the_check_sees_an_upward_import_and_a_circle(fake_package: Path) -> None:
    assert not import_graph.upward(import_graph.edges()) and not import_graph.circles(import_graph.edges())
    (fake_package / "transports" / "http.py").write_text("def f():\n    from ..config.files import y\n")
    ups = import_graph.upward(import_graph.edges())
    assert [(edge.source, edge.target, edge.lazy) for edge in ups] == [("transports.http", "config.files", True)]
    assert _spanning(import_graph.edges()) == [["config.files", "transports.http"]]
