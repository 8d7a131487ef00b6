"""SECURITY.rst stays honest: every test it names exists, and every claim it makes names at least one.

A reference is ``tests/<path>.py::test_name`` or ``tests/<path>.py::TestClass::test_name`` in double
backquotes; a parametrised test is named without its parameters. The claims are the sections under
the part titled :data:`CLAIMS_PART`: each section there without subsections must hold a reference.
Test functions are found with :mod:`ast` (nothing is imported or run), as pytest would collect them:
module-level ``test*`` functions and ``test*`` methods of ``Test*`` classes in ``test_*.py`` files.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "SECURITY.rst"
CLAIMS_PART = "What a hostile server, peer or config file cannot do"
#: Words that the title of some claim must contain: the claims the document has to make.
REQUIRED_CLAIMS = (
    "shell", "environment", "secrets", "origin", "size", "queue", "regular expression", "$ref", "nesting",
    "browser", "terminal", "token files", "fork", "loaded", "deadline", "super-linear", "shared token store",
)
REFERENCE = re.compile(r"``(tests/[A-Za-z0-9_/.-]+?\.py)::([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)?)``")
ANY_REFERENCE = re.compile(r"tests/[A-Za-z0-9_/.-]+?\.py::")
ADORNMENT = re.compile(r"^([=\-~^\"'`#*+:.])\1{2,}\s*$")


@dataclass
class Section:
    title: str
    level: int
    line: int  # 1-based line of the title
    body: list[str] = field(default_factory=list)


def sections(text: str) -> list[Section]:
    """The document's sections in order, each with its level (as docutils assigns them) and its own text."""
    lines = text.splitlines()
    styles: list[tuple[str, bool]] = []
    found: list[Section] = []
    preamble: list[str] = []
    i = 0
    while i < len(lines):
        title = lines[i].strip()
        under = ADORNMENT.match(lines[i + 1]) if i + 1 < len(lines) else None
        if title and not ADORNMENT.match(lines[i]) and under and len(lines[i + 1].rstrip()) >= len(lines[i].rstrip()):
            over = i > 0 and lines[i - 1].rstrip() == lines[i + 1].rstrip()
            style = (under.group(1), over)
            if style not in styles:
                styles.append(style)
            if over:
                (found[-1].body if found else preamble).pop()  # the overline is not body text
            found.append(Section(title, styles.index(style), i + 1))
            i += 2
            continue
        (found[-1].body if found else preamble).append(lines[i])
        i += 1
    return found


def claims(found: list[Section]) -> list[Section]:
    """The sections under the part titled CLAIMS_PART."""
    start = next((n for n, s in enumerate(found) if s.title == CLAIMS_PART), None)
    assert start is not None, f"SECURITY.rst has no section titled {CLAIMS_PART!r}"
    out = []
    for section in found[start + 1:]:
        if section.level <= found[start].level:
            break
        out.append(section)
    return out


def leaves(part: list[Section]) -> list[Section]:
    """The claim sections that have no subsection of their own."""
    return [s for n, s in enumerate(part) if n + 1 == len(part) or part[n + 1].level <= s.level]


def references(text: str) -> list[tuple[str, str]]:
    return REFERENCE.findall(text)


def defined_tests(path: Path) -> set[str]:
    """The tests pytest would collect from ``path``: ``name`` and ``TestClass::name``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            names.update(f"{node.name}::{item.name}" for item in node.body
                         if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"))
    return names


def missing_tests(refs: list[tuple[str, str]], root: Path = ROOT) -> list[str]:
    """The references among ``refs`` that name no test."""
    known: dict[str, set[str]] = {}
    missing = []
    for path, name in refs:
        file = root / path
        if not (file.is_file() and file.name.startswith("test_")):
            missing.append(f"{path}::{name} (no such test file)")
            continue
        if path not in known:
            known[path] = defined_tests(file)
        if name not in known[path]:
            missing.append(f"{path}::{name}")
    return missing


def unproved_claims(text: str) -> list[str]:
    """The claim sections (without subsections) that name no test."""
    return [f"line {s.line}: {s.title}" for s in leaves(claims(sections(text))) if not references("\n".join(s.body))]


# -- the document --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text(encoding="utf-8")


def test_every_test_security_rst_names_exists(doc: str) -> None:
    refs = references(doc)
    assert len(refs) >= 40, f"only {len(refs)} references found: has their form changed?"
    assert len(ANY_REFERENCE.findall(doc)) == len(refs), \
        "a reference not in the form ``tests/<path>.py::test_name`` (double backquotes, no parameters)"
    assert missing_tests(refs) == []


def test_every_claim_names_at_least_one_test(doc: str) -> None:
    assert len(leaves(claims(sections(doc)))) >= len(REQUIRED_CLAIMS)
    assert unproved_claims(doc) == []


def test_the_claims_the_document_must_make_are_there(doc: str) -> None:
    titles = [s.title.lower() for s in claims(sections(doc))]
    assert [word for word in REQUIRED_CLAIMS if not any(word in title for title in titles)] == []


# -- the checks themselves --------------------------------------------------------------------------------------

SAMPLE = """\
========
Security
========

Intro.

{part}
{part_line}

Shell
-----

Never. ``tests/security/test_launch.py::test_argv_items_reach_the_server_as_they_are``

Origins
-------

Redirects
~~~~~~~~~

Not followed. ``tests/security/test_launch.py::test_no_such_test``

Endpoints
~~~~~~~~~

Refused, and no test says so.

Not protected
=============

No references needed here.
"""


def test_the_checks_catch_a_missing_test_and_a_claim_without_one() -> None:
    text = SAMPLE.format(part=CLAIMS_PART, part_line="=" * len(CLAIMS_PART))
    found = sections(text)
    assert [(s.title, s.level) for s in found] == [("Security", 0), (CLAIMS_PART, 1), ("Shell", 2), ("Origins", 2),
                                                   ("Redirects", 3), ("Endpoints", 3), ("Not protected", 1)]
    assert [s.title for s in leaves(claims(found))] == ["Shell", "Redirects", "Endpoints"]
    assert unproved_claims(text) == [f"line {next(s.line for s in found if s.title == 'Endpoints')}: Endpoints"]
    assert missing_tests(references(text)) == ["tests/security/test_launch.py::test_no_such_test"]
    assert missing_tests([("tests/security/nothing_here.py", "test_x")]) == ["tests/security/nothing_here.py::test_x (no such test file)"]


def test_tests_are_found_as_pytest_collects_them(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n"
        "@pytest.mark.parametrize('x', [1, 2])\n"
        "def test_param(x): pass\n"
        "def helper_test(): pass\n"
        "class TestThing:\n"
        "    def test_method(self): pass\n"
        "    def helper(self): pass\n"
        "class Thing:\n"
        "    def test_not_collected(self): pass\n"
    )
    assert defined_tests(tmp_path / "test_sample.py") == {"test_param", "TestThing::test_method"}
    refs = [("test_sample.py", "test_param"), ("test_sample.py", "TestThing::test_method"), ("test_sample.py", "helper_test"),
            ("test_sample.py", "Thing::test_not_collected")]
    assert missing_tests(refs, root=tmp_path) == ["test_sample.py::helper_test", "test_sample.py::Thing::test_not_collected"]
