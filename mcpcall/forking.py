"""What a forked child may do with the clients of its parent: nothing but let go.

A client open when the process forks (gunicorn ``--preload``, Celery prefork,
``multiprocessing`` with fork) is copied into the child without its threads.
Its server process, its HTTP session and its pipes still belong to the parent,
and the locks its threads held at the fork stay held for good in the child. So
in the child, every mcpcall object that owns something:

- refuses to be used, with :class:`~mcpcall.errors.ForkedClient` (connect a new
  client after the fork);
- closes without touching what the parent owns: no signals, no DELETE, no
  closing of buffered files, no joins, no locks the parent's threads held;
- gives up its copies of the parent's pipe descriptors at once (raw, lock-free
  ``os.close``), so the parent's server still sees EOF when the parent closes it.

:class:`Owned` is the one place that knows the owning process; transports
register a ``forget_inherited`` hook that runs in the child right after fork.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from typing import Callable

from .errors import ForkedClient

__all__ = ["Owned", "forked_message", "on_fork_in_child"]

_hooks: weakref.WeakKeyDictionary[object, Callable[[], None]] = weakref.WeakKeyDictionary()


class Owned:
    """Remembers the process that created an object; ``forked`` is True in a child."""

    __slots__ = ("pid",)

    def __init__(self) -> None:
        self.pid = os.getpid()

    @property
    def forked(self) -> bool:
        """True when running in a process other than the one that created the object."""
        return os.getpid() != self.pid

    def check(self, name: str) -> None:
        """Raise :class:`ForkedClient` when called in a forked child."""
        if os.getpid() != self.pid:
            raise ForkedClient(forked_message(name, self.pid))


def forked_message(name: str, pid: int) -> str:
    """What to tell someone using a client for ``name`` created by process ``pid`` after a fork."""
    return (
        f"the client for server {name!r} was created in process {pid} before a fork and cannot be used in "
        f"this process ({os.getpid()}); connect a new client after the fork (for gunicorn --preload: in "
        "post_fork or lazily in the worker; for Celery: in worker_process_init)"
    )


def on_fork_in_child(owner: object, hook: Callable[[], None]) -> None:
    """Run ``hook()`` in a forked child of this process while ``owner`` is alive.

    The hook runs with one thread in the child, before any user code: it must
    only drop references and close raw descriptors.
    """
    _hooks[owner] = hook


def _after_fork_in_child() -> None:
    # Hooks stay registered (they are idempotent): a grandchild lets go of the same things again,
    # and of what the child opened since.
    for hook in list(_hooks.values()):
        with contextlib.suppress(Exception):  # a hook must never break the child
            hook()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
