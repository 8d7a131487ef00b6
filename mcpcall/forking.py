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
import inspect
import os
import weakref
from typing import Callable

from .errors import ForkedClient

__all__ = ["Owned", "forked_message", "generation", "on_fork_in_child"]

#: How many forks lie between the first process that imported mcpcall and this one (0 there, 1 in its
#: child, ...): the at-fork hook counts it up in each child, before any other of mcpcall's hooks run.
#: An object made at one generation is used in a forked child when the two differ, which a hot path
#: checks with one comparison (``owner.born != forking.generation``) instead of a ``getpid()`` system call.
generation = 0

#: owner -> (function, whether it takes the owner). The owner is held weakly, and a hook that is a method
#: of the owner is kept as its plain function, called with the owner: an entry must never keep its own key
#: alive (a bound method holds its object), or every object that ever registered (with all it refers to)
#: would live as long as the process. (No ``WeakMethod`` either: its callback fires at interpreter exit,
#: when module globals are gone, and prints a traceback on Python 3.12+.)
_hooks: weakref.WeakKeyDictionary[object, tuple[Callable[..., None], bool]] = weakref.WeakKeyDictionary()


class Owned:
    """Remembers the process that created an object; ``forked`` is True in a child.

    ``born`` is the fork :data:`generation` it was made at, ``pid`` the process. Both are compared: a
    fork made in C (uWSGI without its Python after-fork call, an extension, ctypes) runs no at-fork
    hook, so only the pid tells its child; the generation lets a hot path refuse a child of
    ``os.fork`` with one comparison before anything else is done.
    """

    __slots__ = ("born", "pid")

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.born = generation

    @property
    def forked(self) -> bool:
        """True when running in a process other than the one that created the object."""
        return self.born != generation or os.getpid() != self.pid

    def check(self, name: str) -> None:
        """Raise :class:`ForkedClient` when called in a forked child."""
        if self.born != generation or os.getpid() != self.pid:
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

    The registration never keeps ``owner`` alive (nor, through it, all that
    ``owner`` refers to): a hook that is a method of ``owner`` is kept as its function,
    and any other hook must not hold ``owner`` (close over a ``weakref.ref`` to
    it instead); one that visibly does (a closure cell) is refused with
    ``ValueError``.
    """
    if inspect.ismethod(hook) and hook.__self__ is owner:
        _hooks[owner] = (hook.__func__, True)
        return
    if any(_cell_holds(cell, owner) for cell in getattr(hook, "__closure__", None) or ()):
        raise ValueError("a fork hook must not hold its owner (it would never be freed): close over a weakref.ref to it")
    _hooks[owner] = (hook, False)


def _cell_holds(cell: object, owner: object) -> bool:
    try:
        return getattr(cell, "cell_contents", None) is owner
    except ValueError:  # an empty cell
        return False


def _after_fork_in_child() -> None:
    global generation
    generation += 1  # first: from here on every object of the parent counts as inherited
    # Hooks stay registered (they are idempotent): a grandchild lets go of the same things again,
    # and of what the child opened since.
    for owner, (hook, takes_owner) in list(_hooks.items()):
        with contextlib.suppress(Exception):  # a hook must never break the child
            if takes_owner:
                hook(owner)
            else:
                hook()


if hasattr(os, "register_at_fork"):  # every platform that can fork (Windows cannot: generation stays 0)
    os.register_at_fork(after_in_child=_after_fork_in_child)
