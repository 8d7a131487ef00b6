"""Notebooks: re-running a cell that connects replaces its client instead of piling up servers.

In a script, ``client = mcpcall.connect(...)`` run again drops the old client,
and its finalizer closes it. In Jupyter (and IPython) that is not enough: the
old client often stays reachable through IPython's history (``Out[3]``, ``_``,
``__`` when the cell ended with ``client``), a traceback kept in
``sys.last_traceback``, or a variable inspector, so every re-run would leave
one more server process running until the kernel restarts.

The rule, applied by :func:`mcpcall.connect` only inside an IPython shell and
only to a ``connect()`` called from notebook code (a cell, or a function
defined in one; also through ``ServerConfig.connect()``):

    a new client with the same ``name`` and the same server spec as an earlier
    client that an *earlier* cell execution connected closes that earlier
    client, once the new one has connected (an INFO line on the
    ``mcpcall.notebook`` logger says so).

So re-running a connect cell leaves one server, whatever still references the
old client (using it raises :class:`~mcpcall.errors.ConnectionClosed`). Clients
connected in the same cell execution never replace each other
(``pool = [mcpcall.connect(spec) for _ in range(4)]`` keeps four), clients the
registry connects or is given are never touched, and nothing changes outside IPython. To
keep two clients of one server from different cells, give them different
``name=`` values; to turn the rule off, set ``mcpcall.notebook.replace_earlier
= False``. The earlier clients are tracked through weak references only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import threading
import weakref
from types import FrameType
from typing import TYPE_CHECKING, Any

from .callbacks import log_exception

if TYPE_CHECKING:
    from .client import Client

__all__ = ["claim", "ipython_shell", "release", "replace_earlier"]

log = logging.getLogger("mcpcall.notebook")

#: Set to False to keep earlier clients open when a cell connects to the same server again.
replace_earlier = True

_lock = threading.Lock()
#: (client name, spec fingerprint) -> [(weak client, execution count of the cell that connected it)]
_connected: dict[tuple[str, str], list[tuple[weakref.ref[Client], int | None]]] = {}


def ipython_shell() -> Any | None:
    """The running IPython shell (a Jupyter kernel's, or a terminal's), or None; never imports IPython."""
    module = sys.modules.get("IPython")
    get = getattr(module, "get_ipython", None)
    if get is None:
        return None
    return get()


def _from_notebook(shell: Any, frame: FrameType | None) -> bool:
    """True if ``frame`` (who called connect or ``ServerConfig.connect``) runs notebook code: its globals are the shell's namespace."""
    namespace = getattr(shell, "user_global_ns", None)
    return namespace is not None and frame is not None and frame.f_globals is namespace


def _fingerprint(spec: Any) -> str:
    """A digest of the server spec (the spec itself may hold secrets: it is not kept)."""
    text = json.dumps(spec, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def claim(client: Client, spec: Any, caller: FrameType | None) -> Client:
    """Record ``client`` (just connected by ``caller`` with ``spec``); in a notebook, close the earlier one it replaces.

    Outside IPython, or for a connect not made by notebook code, does nothing.
    Returns ``client``.
    """
    if not replace_earlier:
        return client
    shell = ipython_shell()
    if shell is None or not _from_notebook(shell, caller):
        return client
    run = getattr(shell, "execution_count", None)
    key = (client.name, _fingerprint(spec))
    earlier: list[Client] = []
    with _lock:
        for other in list(_connected):  # forget clients gone or closed, of any key
            alive = [(ref, count) for ref, count in _connected[other] if _open(ref())]
            if alive:
                _connected[other] = alive
            else:
                del _connected[other]
        kept = []
        for ref, count in _connected.pop(key, []):
            old = ref()
            if old is None or old is client:
                continue
            if count == run:
                kept.append((ref, count))  # connected by the same cell execution: wanted, both of them
            else:
                earlier.append(old)
        kept.append((weakref.ref(client), run))
        _connected[key] = kept
    for old in earlier:
        log.info("server %r: closing the client an earlier cell connected, now that this cell connected the same "
                 "server again (pass another name= to keep both)", client.name)
        try:
            old.close()
        except Exception:  # noqa: BLE001 - the new client is connected: closing the old one must not undo that
            log_exception(log, logging.WARNING, "server %r: closing the earlier client failed:", client.name)
    return client


def release(client: Client) -> None:
    """Never replace ``client`` again: it has an owner now (a :class:`~mcpcall.ToolRegistry` it was given to)."""
    with _lock:
        for key in list(_connected):
            kept = [(ref, count) for ref, count in _connected[key] if ref() is not client]
            if kept:
                _connected[key] = kept
            else:
                del _connected[key]


def _open(client: Client | None) -> bool:
    return client is not None and not client.closed
