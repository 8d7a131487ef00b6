"""What users install is what the tests test: the wheel and the sdist, built from this checkout.

Both are built once (``python -m build`` in a venv of its own, from a copy of the checkout so that
no ``build/`` or ``*.egg-info`` left in the tree can add or hide a file), their file lists are
compared with the source tree, and each is installed with the base dependencies only into a fresh
venv on the oldest and the newest Python the README promises (3.9 and 3.13). There, every module of
the package must import (the extras' imports are lazy: a module that needs one fails only when the
feature is used, with an ImportError naming the extra; an agent framework's module, which exists to
use its framework, fails at import, naming the extra), the README's first example must run, and
so must ``mcpcall demo``. Everything runs with the venv's interpreter in a scratch directory, never
in the checkout, so the source tree cannot shadow what was installed.

The interpreters are pyenv's (``MCPCALL_PYTHON39``/``MCPCALL_PYTHON313`` name others; .ci/run
installs them where they are missing). A Python that is not on this machine is skipped; under ``make test`` (``MCPCALL_REQUIRE_PEERS=1``)
it is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from .conftest import ROOT, everything_argv

PACKAGE = ROOT / "mcpcall"
PYTHONS = {
    "3.9": Path("/root/.pyenv/versions/3.9.18/bin/python"),
    "3.13": Path("/root/.pyenv/versions/3.13.0/bin/python"),
}
# Not part of what a user builds from a clean clone.
IGNORED = shutil.ignore_patterns(
    ".git", ".venv*", ".npm-peers", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis",
    "conformance-results", ".cache", ".fuzz",
)
README_SERVER = '["npx", "-y", "@modelcontextprotocol/server-everything"]'

pytestmark = pytest.mark.timeout(600)


def _env() -> dict[str, str]:
    """The environment of a user's shell: nothing of this test run's paths."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "MCPCALL_"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _run(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in argv], cwd=str(cwd), env=_env(), capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, f"{argv} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _source_modules() -> set[str]:
    """Every module of the source tree, dotted."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.add(".".join(parts))
    return names


def _source_files() -> set[str]:
    """What the package must ship: every module and ``py.typed``."""
    return {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*") if p.suffix == ".py" or p.name == "py.typed"}


def test_every_folder_of_the_package_is_a_regular_package() -> None:
    folders = {p.parent for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    missing = sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").exists())
    assert not missing, f"folders without __init__.py (setuptools' find: leaves them out of the wheel): {missing}"


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(wheel, sdist) built from a copy of this checkout."""
    base = tmp_path_factory.mktemp("packaging")
    source = base / "source"
    shutil.copytree(ROOT, source, ignore=IGNORED)
    builder = base / "builder"
    _run([sys.executable, "-m", "venv", builder], base)
    _run([builder / "bin" / "python", "-m", "pip", "install", "-q", "build"], base)
    out = base / "dist"
    _run([builder / "bin" / "python", "-m", "build", "--sdist", "--wheel", "--outdir", out, source], base)
    (wheel,) = out.glob("mcpcall-*.whl")
    (sdist,) = out.glob("mcpcall-*.tar.gz")
    return wheel, sdist


def test_wheel_ships_every_module(artifacts: tuple[Path, Path]) -> None:
    with zipfile.ZipFile(artifacts[0]) as wheel:
        shipped = {n for n in wheel.namelist() if n.startswith("mcpcall/")}
    assert sorted(_source_files() - shipped) == []
    assert sorted(shipped - _source_files()) == [], "the wheel ships files the checkout does not have"


def test_sdist_ships_every_module(artifacts: tuple[Path, Path]) -> None:
    with tarfile.open(artifacts[1]) as sdist:
        shipped = {n.split("/", 1)[1] for n in sdist.getnames() if "/mcpcall/" in n}
    assert sorted(_source_files() - shipped) == []


def _python(version: str) -> Path:
    """This machine's Python ``version``: ``$MCPCALL_PYTHON39``/``313`` (.ci/run sets them), pyenv's, or on PATH."""
    python = Path(os.environ.get("MCPCALL_PYTHON" + version.replace(".", ""), PYTHONS[version]))
    if not python.exists():
        found = shutil.which(f"python{version}")
        if found:
            return Path(found)
        message = f"Python {version} is not installed here ({python})"
        if os.environ.get("MCPCALL_REQUIRE_PEERS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return python


@pytest.fixture(scope="module", params=[(v, kind) for v in PYTHONS for kind in ("wheel", "sdist")],
                ids=lambda p: f"py{p[0]}-{p[1]}")
def installed(request: pytest.FixtureRequest, artifacts: tuple[Path, Path],
              tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(venv, scratch dir): a fresh venv with the wheel or the sdist installed, base dependencies only."""
    version, kind = request.param
    python = _python(version)
    venv = tmp_path_factory.mktemp(f"venv-{version}-{kind}")
    scratch = tmp_path_factory.mktemp(f"run-{version}-{kind}")
    _run([python, "-m", "venv", venv], scratch)
    _run([venv / "bin" / "python", "-m", "pip", "install", "-q", artifacts[0] if kind == "wheel" else artifacts[1]], scratch)
    return venv, scratch


CHECK_IMPORTS = textwrap.dedent("""
    import importlib, json, pkgutil, sys, traceback
    expected, frameworks = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    failures = {}
    for name in expected:
        try:
            importlib.import_module(name)
        except ImportError as exc:  # an integration whose framework is not installed: it must name its extra
            extra = name.rpartition(".")[2]
            if name not in frameworks or f"pip install 'mcpcall[{extra}]'" not in str(exc):
                failures[name] = traceback.format_exc(limit=3)
        except BaseException:
            failures[name] = traceback.format_exc(limit=3)
        else:
            if name in frameworks:
                failures[name] = "imported with no framework installed: " + name
    walked = []
    try:
        import mcpcall
        walked = ["mcpcall"] + [m.name for m in pkgutil.walk_packages(mcpcall.__path__, "mcpcall.",
                                                                    onerror=walked.append)]
        where = mcpcall.__file__
    except BaseException:
        where = None
    print(json.dumps({"failures": failures, "walked": sorted(map(str, walked)), "file": where}))
""")


def test_every_module_imports_with_the_base_dependencies(installed: tuple[Path, Path]) -> None:
    venv, scratch = installed
    expected = sorted(_source_modules())
    # mcpcall.integrations.<framework> imports its framework (an extra, not installed here) when it is imported.
    frameworks = [name for name in expected if name.startswith("mcpcall.integrations.") and not name.rpartition(".")[2].startswith("_")]
    assert len(frameworks) == 8, frameworks
    done = _run([venv / "bin" / "python", "-c", CHECK_IMPORTS, json.dumps(expected), json.dumps(frameworks)], scratch, timeout=120)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["failures"] == {}, "\n".join(report["failures"].values())
    assert report["file"] and Path(report["file"]).resolve().is_relative_to(venv.resolve())
    assert report["walked"] == expected


def _readme_first_example() -> str:
    lines = (ROOT / "README.rst").read_text(encoding="utf-8").splitlines()
    start = lines.index(".. code-block:: python") + 1
    block: list[str] = []
    for line in lines[start:]:
        if line.strip() and not line.startswith(" "):
            break
        block.append(line)
    return textwrap.dedent("\n".join(block)).strip() + "\n"


def test_readme_first_example_runs(installed: tuple[Path, Path]) -> None:
    venv, scratch = installed
    example = _readme_first_example()
    assert README_SERVER in example, "the README's first example changed: update this test"
    # The same server, from the npm peers ``make test`` installed (no download from npm here).
    example = example.replace(README_SERVER, json.dumps(everything_argv("stdio")))
    done = _run([venv / "bin" / "python", "-c", example], scratch, timeout=120)
    assert "hi" in done.stdout and "99" in done.stdout, done.stdout
    # Nothing at interpreter exit either (a weakref callback of a fork hook once printed a traceback on 3.12+).
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr


def test_cli_demo_runs(installed: tuple[Path, Path]) -> None:
    venv, scratch = installed
    done = _run([venv / "bin" / "mcpcall", "demo"], scratch, timeout=120)
    assert done.stdout.strip()


def test_a_child_python_spawned_with_the_minimal_environment_imports_the_tested_mcpcall() -> None:
    """mcpcall spawns servers with its minimal environment, which drops PYTHONSAFEPATH: a ``-m mcpcall...`` child
    run in the checkout must still import the mcpcall this process tests (``python_argv()`` adds ``-P`` under
    ``make test``), not the checkout's."""
    import mcpcall
    from mcpcall.transports.stdio import default_environment

    from .conftest import python_argv

    done = subprocess.run([*python_argv(), "-c", "import mcpcall; print(mcpcall.__file__)"], cwd=str(ROOT),
                          env=default_environment(), capture_output=True, text=True, timeout=60, check=True)
    assert Path(done.stdout.strip()).resolve() == Path(mcpcall.__file__).resolve()
