"""Tool calls as Celery tasks: one :class:`mcpcall.ToolRegistry` per worker process, no event loop.

Run a broker and a worker (from the repository root)::

    redis-server --bind 127.0.0.1 --port 6379
    MCPCALL_CONFIG=mcp.json celery -A examples.celery_app worker --pool prefork --concurrency 4

then, from any process that can reach the broker (a web view, another task, a script)::

    from examples.celery_app import execute_tool_call, execute_many
    message = execute_tool_call.delay(tool_call, 30).get(timeout=60)  # {"role": "tool", ...}
    messages = execute_many.delay(tool_calls, 30).get(timeout=60)     # one message per call, in order

``tool_call`` is what the LLM returned (an OpenAI Chat tool call, a Responses
``function_call`` item or an Anthropic ``tool_use`` block, as plain dicts);
the task returns the message for the model's next turn. A failure of the call
(unknown tool, bad arguments, ``isError``, timeout, a dead server) comes back
as an error message, never as a task failure; only something that is no tool
call at all fails the task (``InvalidRequest``: a bug in the caller). Give
the tasks a deadline (30 s here) shorter than the caller's ``get(timeout=...)``,
so the message arrives before the caller stops waiting. Running this file directly
(``python examples/celery_app.py``) runs one call in-process, no broker needed.

Settings (environment):

- ``MCPCALL_CELERY_BROKER``: the broker URL, also the result backend unless
  ``MCPCALL_CELERY_BACKEND`` is set (default ``redis://127.0.0.1:6379/0``);
- ``MCPCALL_CONFIG``: an ``mcpServers`` config file (the format of
  :meth:`mcpcall.ToolRegistry.from_config`); default: the bundled demo server;
- ``MCPCALL_TOKEN_REDIS``: the Redis that keeps the OAuth tokens of the
  servers with ``oauth`` settings (:class:`mcpcall.RedisTokenStore`, keys under
  ``mcpcall:``), shared by every worker; default: the broker's URL when the
  broker is a Redis (``file``, the default for any other broker, keeps them in
  each machine's own token file instead).

Why per worker process: the prefork pool forks its children from the main
worker process, and a client open across a fork cannot be used in the child
(see :mod:`mcpcall.forking`). So the registry is built in ``worker_process_init``
(in each child, after the fork) and closed in ``worker_process_shutdown``. It
is lazy: a server starts on the first call that needs it (``worker_process_init``
must return within a few seconds, so nothing connects there), and it is
restarted on a later call if it dies. The registry is thread-safe, so the
same code serves the ``threads`` pool (one registry shared by the threads)
and ``solo`` (built on first use, as ``worker_process_init`` is not sent).

From one machine to many: every worker machine runs the same command with the
same config file (ship it with the code, or mount it; keep secrets out of it
with ``${env:NAME}`` / ``envFile``, set on each machine). Nothing is shared
between workers but the broker:

- a **stdio** server (``command`` / ``args``) runs once per worker process on
  each machine: ``N`` machines x ``--concurrency C`` means ``N*C`` copies of
  it. That is what you want for stateless tools, and it scales with the
  workers; it must be installed on every machine;
- a **remote** server (``url``) is shared: every worker process holds its own
  HTTP session to the same server, which must take ``N*C`` clients at once;
- a server that exists only on some machines (a GPU, a private network, a
  licensed binary): give it a queue. Those machines run a config file that
  names it and ``celery ... worker -Q celery,mcp.gpu``; the caller sends its
  calls there with ``execute_tool_call.apply_async((call,), queue="mcp.gpu")``
  (the server is the middle part of the tool name, ``mcp__gpu__render``) or
  with a router in ``task_routes``. Other workers never see those calls;
- state that must live across calls (a browser session, a scratch
  directory) lives in one server process, so calls that share it must go to
  one worker process: give them a queue of their own consumed by one worker
  with ``--concurrency 1``, or keep that state outside the server;
- OAuth tokens (a remote server whose entry has ``oauth`` settings) are shared
  through Redis (``MCPCALL_TOKEN_REDIS``): every worker process on every machine
  uses the one token, and when it is about to expire exactly one process
  refreshes it, under the store's refresh lock, while the others wait and then
  take its token. With refresh-token rotation (a refresh token is good once, and
  reusing it may revoke them all) that is what keeps the fleet signed in. A
  worker never asks a person: sign in once, from a machine with a browser, into
  the same Redis (``python examples/celery_app.py login SERVER``, with the same
  settings); a worker whose token cannot be refreshed answers with a tool message
  saying that a sign-in is needed. Without Redis for tokens, each machine keeps
  its own token file, and its processes share that (``flock``), not the others'.

If the token Redis does not answer, a call of a server with OAuth fails at once
with a tool message naming it (``TokenStoreUnavailable``); other servers go on.

Delivery: tasks are acknowledged when they start (Celery's default), so a tool
call runs at most once even if a worker dies mid-call (its caller then times
out on ``.get``). Tool calls have side effects; turn on ``acks_late`` only for
tools that are safe to run twice. One prefetched task per process
(``worker_prefetch_multiplier = 1``) keeps long calls from queueing behind one
busy process while another is idle.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

from celery import Celery
from celery.signals import worker_process_init, worker_process_shutdown

import mcpcall

log = logging.getLogger("mcpcall.examples.celery")

BROKER = os.environ.get("MCPCALL_CELERY_BROKER", "redis://127.0.0.1:6379/0")
BACKEND = os.environ.get("MCPCALL_CELERY_BACKEND", BROKER)
# The broker's Redis keeps the tokens too, unless the broker is not a Redis (RabbitMQ, SQS): then the token file.
_BROKER_IS_REDIS = BROKER.split(":", 1)[0].lower() in ("redis", "rediss", "unix")
TOKEN_REDIS = os.environ.get("MCPCALL_TOKEN_REDIS") or (BROKER if _BROKER_IS_REDIS else "file")
DEMO_CONFIG = {"mcpServers": {"demo": {"command": sys.executable, "args": ["-m", "mcpcall.demo_server"]}}}

app = Celery("mcpcall_tools", broker=BROKER, backend=BACKEND)
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    result_expires=3600,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
)

_lock = threading.Lock()
_registry: mcpcall.ToolRegistry | None = None
_tokens: mcpcall.RedisTokenStore | None = None


def token_store() -> mcpcall.RedisTokenStore | None:
    """This process's store of OAuth tokens in ``MCPCALL_TOKEN_REDIS`` (``None``: each machine's token file)."""
    global _tokens
    if TOKEN_REDIS.strip().lower() == "file":
        return None
    if _tokens is None:
        _tokens = mcpcall.RedisTokenStore(TOKEN_REDIS)  # connects on first use: servers without OAuth never touch it
    return _tokens


def build_registry() -> mcpcall.ToolRegistry:
    """A registry over ``MCPCALL_CONFIG`` (a config file) or, without it, the demo server; OAuth tokens in Redis."""
    store = token_store()
    options = {"connect_options": {"token_store": store}} if store is not None else {}
    return mcpcall.ToolRegistry.from_config(os.environ.get("MCPCALL_CONFIG") or DEMO_CONFIG, **options)


def registry() -> mcpcall.ToolRegistry:
    """This process's registry, built on first use where ``worker_process_init`` did not build it."""
    global _registry
    with _lock:
        if _registry is None or _registry.closed:
            _registry = build_registry()
        return _registry


def close_registry() -> None:
    """Close this process's registry (its servers end) and its token store; the next call builds new ones."""
    global _registry, _tokens
    with _lock:
        current, _registry = _registry, None
        tokens, _tokens = _tokens, None
    if current is not None:
        current.close()
    if tokens is not None:
        tokens.close()


def sign_in(server: str) -> None:
    """Sign in to ``server`` (a name in ``MCPCALL_CONFIG``) once, here, with a browser: the token goes to the token Redis."""
    configs = mcpcall.load_config(os.environ["MCPCALL_CONFIG"])
    if server not in configs:
        raise SystemExit(f"no server {server!r} in {os.environ['MCPCALL_CONFIG']} (it has: {', '.join(configs) or 'none'})")
    config = configs[server]
    if config.oauth is None:
        raise SystemExit(f"server {server!r} has no oauth settings in {os.environ['MCPCALL_CONFIG']}")
    with config.oauth.make_oauth(token_store=token_store()) as auth:
        auth.login(config.spec["url"])
    print(f"signed in to {server!r}; the workers share the token")


@worker_process_init.connect
def _open_in_child(**_: Any) -> None:
    """In each prefork child, after the fork: a registry of this process's own (lazy: starts nothing yet)."""
    global _registry
    with _lock:
        _registry = build_registry()
    log.info("tool registry ready in worker process %d", os.getpid())


@worker_process_shutdown.connect
def _close_in_child(**_: Any) -> None:
    """As a prefork child exits: close its servers (children leave with ``os._exit``, so no atexit hook runs)."""
    close_registry()
    log.info("tool registry closed in worker process %d", os.getpid())


@app.task(name="mcpcall.execute_tool_call")
def execute_tool_call(tool_call: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
    """Run one LLM tool call; the tool message for the model's next turn (an error message on failure)."""
    return registry().execute(tool_call, timeout=timeout)


@app.task(name="mcpcall.execute_many")
def execute_many(tool_calls: list[dict[str, Any]], timeout: float | None = None) -> list[dict[str, Any]]:
    """Run tool calls concurrently in this worker process under one deadline; the messages in order."""
    return registry().execute_many(tool_calls, timeout=timeout)


if __name__ == "__main__" and sys.argv[1:2] == ["login"] and len(sys.argv) == 3:
    try:
        sign_in(sys.argv[2])
    finally:
        close_registry()
elif __name__ == "__main__":
    # No broker, no worker: run the tasks in this process to show what they return.
    calls = [
        {"id": "call_1", "type": "function",
         "function": {"name": "mcp__demo__echo", "arguments": '{"message": "hello from a task"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "mcp__demo__add", "arguments": '{"a": 2, "b": 3}'}},
    ]
    try:
        print(execute_tool_call.apply((calls[0],)).get())
        for message in execute_many.apply((calls, 30.0)).get():
            print(message)
    finally:
        close_registry()
