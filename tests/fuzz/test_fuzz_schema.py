"""A server's tool schemas fed to argument and result checks (mcpcall.schema) and their regexes (mcpcall.patterns).

The regular expressions run in a child interpreter per engine (tests/fuzz/isolated_patterns.py): a
pattern that escaped the bounds would hold the GIL in C where nothing here could stop it; the child has a
deadline instead. In this process: what walks a schema or a value (depth, canonical forms for ``enum``,
``const`` and ``uniqueItems``, ``x-mcp-header`` annotations) takes any value at a linear cost.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpcall import schema
from mcpcall.headers import InvalidHeaderAnnotation, header_params
from tests.conftest import ROOT, child_pythonpath

from .cost import assert_linear, steps
from .profiles import PROFILE, fuzz
from .strategies import json_values, materialize, nested, schemas, very_deep_values

HAVE_RE2 = importlib.util.find_spec("re2") is not None
ENGINES = ["fallback", pytest.param("re2", marks=pytest.mark.skipif(not HAVE_RE2, reason="google-re2 not installed"))]
CHILD_SECONDS = 150 if PROFILE != "deep" else 3000


@pytest.mark.timeout(CHILD_SECONDS + 30)
@pytest.mark.parametrize("engine", ENGINES)
def test_server_regexes_run_in_bounded_time(engine: str) -> None:
    env = dict(os.environ, MCPCALL_FUZZ_ENGINE=engine, PYTHONPATH=child_pythonpath())
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-x", "--import-mode=append", "-W", "ignore",
            "-o", f"timeout={CHILD_SECONDS}", str(Path(__file__).with_name("isolated_patterns.py"))]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=CHILD_SECONDS, env=env, cwd=str(ROOT))
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the regex properties ({engine}) did not finish in {CHILD_SECONDS} s: a pattern ran without bound\n"
                    f"{(exc.stdout or b'')[-3000:]!r}")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]


@fuzz(100)
@given(st.one_of(schemas, very_deep_values, json_values))
def test_walking_any_value_never_recurses(value: Any) -> None:
    value = materialize(value)
    schema.deeper_than(value, schema.MAX_DEPTH)
    schema._pattern_total(value)
    schema._canonical(value)
    schema._has_key(value, "unevaluatedProperties")
    try:
        for name, path in header_params(value if isinstance(value, dict) else {}):
            assert name and path
    except InvalidHeaderAnnotation:
        pass


@pytest.mark.parametrize("kind", ["list", "dict", "mixed"])
def test_walking_a_value_is_linear(kind: str) -> None:
    for walk in (lambda v: schema.deeper_than(v, 10**9), schema._canonical, schema._pattern_total):
        assert_linear(lambda n, walk=walk: steps(walk, nested(n, kind)), 16, f"{walk} of a {kind} nested n deep")
        assert_linear(lambda n, walk=walk: steps(walk, [nested(3, kind)] * n), 16, f"{walk} of n {kind}s")
