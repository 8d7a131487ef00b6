"""``import mcpcall`` stays light: the heavy dependencies load on first use, not at import.

The import time itself (against the official SDK's) is measured by
``benchmarks/bench_memory.py`` and ``benchmarks/bench_stdio.py``; here only
what a bare import loads, which is what decides it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import mcpcall

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(mcpcall.__file__)))
HEAVY = ("requests", "urllib3", "jsonschema", "sseclient", "re2", "ssl", "http.client", "email", "mcpcall.registry",
         "mcpcall.auth.oauth")

SCRIPT = r"""
import json, sys
import mcpcall
names = ("Client", "connect", "CallToolResult", "ToolError", "RequestFuture", "ServerConfig")
assert all(hasattr(mcpcall, name) for name in names)
print(json.dumps(sorted(sys.modules)))
"""


def test_import_mcpcall_loads_no_heavy_dependency() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], check=False, capture_output=True, text=True, timeout=30,
                         env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    heavy = sorted(name for name in loaded if any(name == h or name.startswith(h + ".") for h in HEAVY))
    assert not heavy, f"import mcpcall loaded {heavy}"


def test_lazy_names_still_resolve() -> None:
    script = "import mcpcall; print(mcpcall.OAuth.__name__, mcpcall.ToolRegistry.__name__, mcpcall.SignInRequired.__name__)"
    out = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=30,
                         env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["OAuth", "ToolRegistry", "SignInRequired"]


def test_dir_lists_every_public_name_without_importing_it() -> None:
    """``dir()`` (tab completion in IPython and Jupyter, ``help``) offers the lazy names too, and loads none of them."""
    script = r"""
import json, sys
import mcpcall
import mcpcall.auth
names = {"mcpcall": dir(mcpcall), "mcpcall.auth": dir(mcpcall.auth)}
missing = {m: sorted(set(sys.modules[m].__all__) - set(listed)) for m, listed in names.items()}
print(json.dumps({"missing": missing, "loaded": sorted(sys.modules)}))
"""
    out = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=30,
                         env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["missing"] == {"mcpcall": [], "mcpcall.auth": []}
    lazy = ("mcpcall.registry", "mcpcall.auth.oauth", "mcpcall.auth.tokens", "mcpcall.auth.redis_store", "mcpcall.auth.grants")
    loaded = sorted(name for name in report["loaded"] if any(name == m or name.startswith(m + ".") for m in lazy))
    assert not loaded, f"dir() imported {loaded}"
