"""Hypothesis settings for the fuzz tests: one profile per purpose, chosen by ``MCPCALL_FUZZ``.

- ``ci`` (the default): derandomized, so a failure is the same failure on the next run and on another machine;
  budgets that keep the whole of ``tests/fuzz`` to about a minute on a loaded two-core machine.
- ``random``: the same budgets, a new random search each run (failures are saved in Hypothesis' database).
- ``deep``: twenty times the examples, random: ``MCPCALL_FUZZ=deep pytest tests/fuzz`` searches for an hour or so.

The profiles are built here and passed to each test (:func:`fuzz`), never loaded globally: the property
tests elsewhere in the suite keep their own settings.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, settings

PROFILE = os.environ.get("MCPCALL_FUZZ", "ci")
if PROFILE not in ("ci", "random", "deep"):
    raise RuntimeError(f"MCPCALL_FUZZ must be ci, random or deep, not {PROFILE!r}")

#: Each example must finish within this: far above what any example takes, far below a hang.
DEADLINE = timedelta(seconds=5)

_COMMON: dict[str, Any] = {
    "deadline": DEADLINE,
    "print_blob": True,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example,
                              HealthCheck.function_scoped_fixture],
}
settings.register_profile("mcpcall-fuzz-ci", derandomize=True, database=None, **_COMMON)
settings.register_profile("mcpcall-fuzz-random", **_COMMON)
settings.register_profile("mcpcall-fuzz-deep", **_COMMON)
_SCALE = {"ci": 1, "random": 1, "deep": 20}[PROFILE]


def fuzz(examples: int, **overrides: Any) -> settings:
    """The settings of one fuzz test: ``examples`` examples (times the profile's scale), the profile's other choices."""
    return settings(settings.get_profile(f"mcpcall-fuzz-{PROFILE}"), max_examples=examples * _SCALE, **overrides)
