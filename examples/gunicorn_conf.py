"""gunicorn settings for ``examples/flask_app.py``: preload, 2 workers of 4 threads, 127.0.0.1 only.

From the repository root::

    gunicorn -c examples/gunicorn_conf.py examples.flask_app:app

Command-line options override these (``-b 127.0.0.1:9000``, ``-w 4``, …).

The hooks close the app's :class:`~mcpcall.ToolRegistry` (found in
``app.extensions["mcpcall"]``) when a worker exits (``worker_exit``) and, in
case the master connected it before forking, when the master exits
(``on_exit``), so no MCP server process outlives the process that started it.
Closing is idempotent, and in a worker it never touches the master's servers.

``python examples/gunicorn_conf.py`` prints the command line these settings amount to.
"""

from __future__ import annotations

from typing import Any

wsgi_app = "examples.flask_app:app"
bind = ["127.0.0.1:8000"]
preload_app = True  # the app (and its registry) is imported in the master, before the fork
workers = 2
threads = 4  # gthread workers: each request on a thread, all of a worker's threads share its registry
control_socket_disable = True  # gunicorn >= 25.1 otherwise opens a unix control socket


def _close_registry(app: Any, where: str, log: Any) -> None:
    extensions = getattr(app, "extensions", None)
    registry = extensions.get("mcpcall") if isinstance(extensions, dict) else None
    if registry is not None:
        registry.close()
        log.info("mcpcall registry closed (%s)", where)


def worker_exit(server: Any, worker: Any) -> None:
    """In the worker, as it exits: close its registry (its own MCP servers)."""
    _close_registry(getattr(worker, "wsgi", None), f"worker {worker.pid}", server.log)


def on_exit(server: Any) -> None:
    """In the master, as it exits: close its registry (only matters if it connected before forking)."""
    _close_registry(getattr(server.app, "callable", None), "master", server.log)


if __name__ == "__main__":
    print(f"gunicorn {'--preload ' if preload_app else ''}-w {workers} --threads {threads} -b {bind[0]} "
          f"--no-control-socket -c examples/gunicorn_conf.py {wsgi_app}")
