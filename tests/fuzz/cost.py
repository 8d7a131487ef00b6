"""Measuring what a step costs, to show it grows linearly with what the server sent.

Where the work is Python, cost is counted, not clocked: :func:`steps` counts the line events (and calls)
of every Python frame the step runs on this thread, the same number on every run and every machine. Where
the work is C (a regular expression, ``json``), :func:`seconds` takes the best of several runs, and the
bounds on it are wide.

Growth is judged from the differences between sizes (:func:`growth`): the cost at ``2n`` minus the cost at
``n``, against the cost at ``32n`` minus the cost at ``16n``. A fixed overhead cancels out; a linear step
gives 16, a quadratic one 256.
"""

from __future__ import annotations

import gc
import sys
import time
from typing import Any, Callable

#: The most a difference may grow from ``n -> 2n`` to ``16n -> 32n`` (16 when linear; quadratic: 256).
LINEAR_RATIO = 40.0


class _OverLimit(BaseException):
    """Raised inside the measured step once it has spent its limit (a BaseException: ``except Exception`` lets it by)."""


#: What :func:`steps` stops at when given no limit: a step that costs this much is a hang for these tests.
STEP_LIMIT = 20_000_000


def steps(fn: Callable[..., Any], *args: Any, limit: int = STEP_LIMIT, **kwargs: Any) -> int:
    """How many line events and calls ``fn(*args, **kwargs)`` makes in Python code (on this thread); what it
    raises is ignored. It is stopped once past ``limit`` (then ``limit + 1``): a runaway step fails its bound
    instead of hanging the test."""
    count = 0

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        count += 1
        if count > limit:
            raise _OverLimit()
        return local

    previous = sys.gettrace()
    sys.settrace(local)
    try:
        fn(*args, **kwargs)
    except _OverLimit:
        return limit + 1
    except Exception:  # noqa: BLE001 - what it raises is checked elsewhere; here only its cost counts
        pass
    finally:
        sys.settrace(previous)
    return count


def seconds(fn: Callable[..., Any], *args: Any, repeat: int = 5, **kwargs: Any) -> float:
    """The best time of ``repeat`` runs of ``fn(*args, **kwargs)`` (garbage collection off while timing)."""
    best = float("inf")
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            started = time.perf_counter()
            try:
                fn(*args, **kwargs)
            except Exception:  # noqa: BLE001 - as in steps()
                pass
            best = min(best, time.perf_counter() - started)
    finally:
        if enabled:
            gc.enable()
    return best


def growth(cost: Callable[[int], float], n: int) -> tuple[float, list[float]]:
    """``(ratio, costs)``: how the cost's growth from ``n`` to ``2n`` compares with its growth from ``16n`` to ``32n``.

    Each size is measured after a first run at it: what is done once per process (a lazy import, a cache
    filled) is not counted as growth.
    """
    costs = []
    for size in (n, 2 * n, 16 * n, 32 * n):
        cost(size)
        costs.append(cost(size))
    small = costs[1] - costs[0]
    large = costs[3] - costs[2]
    return large / max(small, 1), costs


def assert_linear(cost: Callable[[int], float], n: int, what: str, limit: float = LINEAR_RATIO) -> None:
    """Fail when the cost of ``what`` grows faster than linearly between sizes ``n`` and ``32n``."""
    ratio, costs = growth(cost, n)
    assert max(costs) <= STEP_LIMIT, f"{what}: a step ran past {STEP_LIMIT} steps (costs at n, 2n, 16n, 32n: {costs})"
    assert ratio <= limit, (f"{what}: cost grows {ratio:.0f}x from 16n->32n as from n->2n (linear: 16); "
                            f"costs at n, 2n, 16n, 32n: {costs}")


def assert_linear_time(fn: Callable[[Any], Any], make: Callable[[int], Any], n: int, what: str,
                       factor: int = 16, limit: float | None = None) -> None:
    """Fail when ``fn(make(factor * n))`` takes more than ``limit`` (default: 4 x ``factor``) times ``fn(make(n))``,
    best of several runs each (quadratic: ``factor`` squared)."""
    bound = 4.0 * factor if limit is None else limit
    small_input, large_input = make(n), make(factor * n)
    small = seconds(fn, small_input)
    large = seconds(fn, large_input, repeat=3)
    assert large <= bound * max(small, 2e-3), (f"{what}: {large:.4f} s at {factor}n against {small:.4f} s at n "
                                                f"(linear: {factor}x; the bound is {bound:g}x)")


def assert_comparable(cost: Callable[[Any], float], normal: Any, pathological: Any, what: str, limit: float,
                      fixed: float = 0) -> None:
    """Fail when ``pathological`` costs more than ``limit`` times ``normal`` (an input of the same size), plus ``fixed``
    (what a budget of the step allows whatever the input: a conversion's node budget)."""
    a, b = cost(normal), cost(pathological)
    assert b <= limit * a + fixed, (f"{what}: the pathological input costs {b} against {a} for a normal one "
                                            f"of the same size")
