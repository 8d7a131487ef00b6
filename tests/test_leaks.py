"""Nothing mcpcall registers for the life of the process keeps a closed client alive.

Counted with the garbage collector after many connect/close cycles: what stays
alive must not grow with the number of cycles (every stdio client ever
connected used to stay reachable through its fork hook, with its dispatcher,
handlers, tool catalog, caches and stderr tail).
"""

from __future__ import annotations

import gc
import os
import weakref
from typing import Any, Dict

import pytest

import mcpcall
from mcpcall import forking
from mcpcall.client import Client
from mcpcall.dispatcher import Dispatcher
from mcpcall.transports.stdio import StdioTransport
from tests.conftest import demo_argv

CYCLES = 30
KEPT = 2  # at most this many of each may stay alive, whatever the number of cycles


def _alive() -> Dict[str, int]:
    gc.collect()
    counts = {"StdioTransport": 0, "Client": 0, "Dispatcher": 0}
    for obj in gc.get_objects():
        if issubclass(type(obj), StdioTransport):
            counts["StdioTransport"] += 1
        elif issubclass(type(obj), Client):
            counts["Client"] += 1
        elif issubclass(type(obj), Dispatcher):
            counts["Dispatcher"] += 1
    return counts


def _at_most(before: Dict[str, int], after: Dict[str, int]) -> Dict[str, int]:
    """What grew over the cycles and by how much (only the kinds that grew past KEPT)."""
    return {kind: after[kind] - before[kind] for kind in after if after[kind] - before[kind] > KEPT}


def test_connect_close_cycles_leave_no_clients_alive() -> None:
    before = _alive()
    for _ in range(CYCLES):
        with mcpcall.connect(demo_argv(), protocol="legacy", close_timeout=2.0) as client:
            client.list_tools()  # the catalog and caches are what made a leaked client heavy
    del client
    assert _at_most(before, _alive()) == {}, f"alive after {CYCLES} connect/close cycles"


def test_registry_restart_cycles_leave_no_clients_alive() -> None:
    registry = mcpcall.ToolRegistry({"demo": demo_argv()})
    try:
        name = next(t.name for t in registry.tools() if t.name.endswith("echo"))
        before = _alive()
        for index in range(CYCLES // 3):
            registry.client("demo").close()  # closed by its user: the next call restarts it
            assert registry.call(name, {"message": f"#{index}"}).text == f"#{index}"
        after = _alive()
    finally:
        registry.close()
    assert _at_most(before, after) == {}, f"alive after {CYCLES // 3} registry restarts"


class _Owner:
    def __init__(self) -> None:
        self.seen = 0

    def hook(self) -> None:
        self.seen += 1


def test_a_fork_hook_never_keeps_its_owner_alive() -> None:
    owner = _Owner()
    forking.on_fork_in_child(owner, owner.hook)  # a bound method holds its object: held weakly
    ref = weakref.ref(owner)
    del owner
    gc.collect()
    assert ref() is None


def test_a_fork_hook_that_holds_its_owner_is_refused() -> None:
    owner = _Owner()
    with pytest.raises(ValueError, match="must not hold its owner"):
        forking.on_fork_in_child(owner, lambda: owner.hook())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_method_hook_still_runs_in_a_forked_child() -> None:
    owner = _Owner()
    forking.on_fork_in_child(owner, owner.hook)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.write(write, str(owner.seen).encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        seen: Any = os.read(read, 16)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert seen == b"1" and owner.seen == 0


def test_registries_made_and_closed_do_not_stay_alive() -> None:
    from mcpcall.registry.registry import ToolRegistry

    def registries() -> int:
        gc.collect()
        return sum(issubclass(type(obj), ToolRegistry) for obj in gc.get_objects())

    before = registries()
    for _ in range(CYCLES):
        registry = mcpcall.ToolRegistry({"demo": demo_argv()}, lazy=True)  # a notebook cell run again and again
        registry.close()
    del registry
    assert registries() - before <= KEPT
