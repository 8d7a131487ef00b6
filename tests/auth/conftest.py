"""Fixtures of the auth tests: every auth object a test makes is closed after it."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

#: The auth objects (OAuth, the grants) the tests of this folder made; each test's files append to it.
_made: list[Any] = []


@pytest.fixture(autouse=True)
def _close_auth() -> Iterator[None]:
    yield
    while _made:
        _made.pop().close()
    gc.collect()  # tracebacks of expected AuthErrors hold responses (and their sockets) in cycles
