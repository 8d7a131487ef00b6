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
