"""The table of threads in the package docstring is true to the code.

Every thread name the package can give (a ``"mcpcall-..."`` literal, or a role the stdio and memory transports
put into ``mcpcall-{role}-...``) has its row, and every row names a thread the package starts; the threads a
running client really has each match a row.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import mcpcall
from tests.conftest import demo_argv
from tests.import_graph import PACKAGE

ROW = re.compile(r"^    (mcpcall-[a-z]+(?:-[a-z]+)*)(-<server>)?(-<n>)?\s", re.M)
# A thread's name given in code: a name= argument, a name parameter's default, or a constant of thread names.
LITERAL = re.compile(r"""(?:\bname\s*=\s*|\bname: str = |_PREFIX = |THREAD_NAME = )f?["'](mcpcall-[a-z]+(?:-[a-z]+)*)""")
ROLE = re.compile(r"""(?:_spawn\(self\._\w+|\(self\._\w+), "([a-z]+)"\)""")


def _table() -> dict[str, bool]:
    """Each row's fixed part, and whether a server's name follows it."""
    doc = mcpcall.__doc__ or ""
    return {match.group(1): bool(match.group(2)) for match in ROW.finditer(doc)}


def _code_names(package: Path) -> set[str]:
    names: set[str] = set()
    for path in package.rglob("*.py"):
        if "__pycache__" in path.parts or path.name == "demo_server.py":
            continue
        text = path.read_text(encoding="utf-8")
        names.update(LITERAL.findall(text))
        if "mcpcall-{role}-" in text:
            names.update(f"mcpcall-{role}" for role in ROLE.findall(text))
    return names


def test_every_thread_name_in_the_code_has_its_row() -> None:
    table = _table()
    assert "mcpcall-scheduler" in table and "mcpcall-reader" in table  # the table is there and parsed
    code = _code_names(PACKAGE)
    missing = sorted(name for name in code if name not in table)
    assert not missing, f"threads started in mcpcall/ without a row in mcpcall/__init__.py's table: {missing}"


def test_every_row_names_a_thread_of_the_code() -> None:
    code = _code_names(PACKAGE)
    stale = sorted(name for name in _table() if name not in code)
    assert not stale, f"rows of mcpcall/__init__.py's thread table no code starts: {stale}"


def test_a_running_clients_threads_each_match_a_row() -> None:
    table = _table()
    seen: list[str] = []
    with mcpcall.connect(demo_argv(), name="threads") as client:
        steps: list[object] = []
        client.call_tool("slow", {"seconds": 0.05, "steps": 2}, on_progress=lambda *args: steps.append(args))
        client.ping()
        names = [thread.name for thread in threading.enumerate() if thread.name.startswith("mcpcall-")]
        seen.extend(names)
        for name in names:
            rows = [row for row, named in table.items() if name == row or (named and name.startswith(f"{row}-threads"))]
            assert rows, f"thread {name!r} has no row in mcpcall/__init__.py's table"
    assert any(name.startswith("mcpcall-reader-threads") for name in seen), seen
    assert any(name == "mcpcall-scheduler" for name in seen), seen
    assert any(name.startswith("mcpcall-callbacks-threads") for name in seen), seen
