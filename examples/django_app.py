"""MCP tools behind a Django project in one file: one registry per process, shared by its request threads.

Run it, from the repository root::

    python examples/django_app.py runserver 127.0.0.1:8000      # Django's dev server (threaded)
    gunicorn -w 2 --threads 4 -b 127.0.0.1:8000 --no-control-socket examples.django_app:application

then ``curl 127.0.0.1:8000/tools``, ``curl -X POST 127.0.0.1:8000/call -d
'{"name": "mcp__demo__echo", "arguments": {"message": "hi"}}'``, ``/stats``,
``/health``. ``python examples/django_app.py`` with no arguments runs a few
requests through Django's test client (no server, no port) and prints the answers.

How the registry is made: lazily, by :func:`get_registry`, the first time a
view needs it, under a lock (two request threads arriving at once get the
same one), then shared by every thread of the process (the registry is
thread-safe). Not at import and not in ``AppConfig.ready()``, because those
run in processes that never serve a request (``manage.py migrate``, the
``runserver`` autoreloader's parent, the gunicorn master with ``--preload``),
and because a lazily made registry can be closed and made again
(:func:`close_registry`), which tests want. It would be safe either way: a
registry connects only when first used, and one made before a fork lets go of
the parent's servers in the child. :func:`close_registry` runs at interpreter
exit (``atexit``; gunicorn workers exit through it too), closing the
process's MCP servers.

The servers: the bundled demo server by default; ``MCPCALL_CONFIG`` may name
an ``mcpServers`` config file instead (read when the registry is made).

Endpoints (the same as ``examples/flask_app.py``):

- ``GET /tools``: the tools in OpenAI Chat Completions format;
- ``POST /call``: an OpenAI tool call (``{"id", "type": "function", "function":
  {"name", "arguments"}}``) or ``{"name", "arguments"[, "id"]}``. The answer is
  the tool message (``{"role": "tool", "tool_call_id", "content"}``) with HTTP
  200, also when the tool failed: an error result, an unknown tool, a dead
  server or a timeout is a message whose content starts with ``Error:``, for
  the model to read. HTTP 400 only for a body that is not JSON or not a tool call;
- ``GET /stats``: this process's per-tool counts and latencies;
- ``GET /health``: this process's pid and its servers.

Settings are configured here with ``settings.configure()`` unless something
configured them already (Django allows it once per process, e.g. pytest
running several test files); then use this module as the ``ROOT_URLCONF``.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import sys
import threading
import uuid
from typing import Any

import django
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

import mcpcall

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY=os.environ.get("DJANGO_SECRET_KEY", "mcpcall-example-not-a-secret"),
        ALLOWED_HOSTS=["127.0.0.1", "localhost", "testserver"],
        ROOT_URLCONF=__name__,
        INSTALLED_APPS=[],
        MIDDLEWARE=["django.middleware.common.CommonMiddleware"],
        DATABASES={},
        USE_TZ=True,
    )
    django.setup()

DEMO = {"mcpServers": {"demo": {"command": sys.executable, "args": ["-m", "mcpcall.demo_server"]}}}

_registry: mcpcall.ToolRegistry | None = None
_registry_lock = threading.Lock()


def get_registry() -> mcpcall.ToolRegistry:
    """This process's registry, made on first use (of ``$MCPCALL_CONFIG``, or the demo server)."""
    global _registry
    registry = _registry
    if registry is None:
        with _registry_lock:
            registry = _registry
            if registry is None:
                registry = _registry = mcpcall.ToolRegistry.from_config(
                    os.environ.get("MCPCALL_CONFIG") or DEMO, timeout=30.0)
    return registry


def close_registry() -> None:
    """Close this process's registry (its MCP servers); the next request makes a new one."""
    global _registry
    with _registry_lock:
        registry, _registry = _registry, None
    if registry is not None:
        registry.close()


atexit.register(close_registry)


def _tool_call(body: Any) -> Any:
    """An OpenAI tool call from the request body (``{"name", "arguments"}`` is turned into one)."""
    if isinstance(body, dict) and "function" not in body and isinstance(body.get("name"), str):
        arguments = body.get("arguments", {})
        return {
            "id": str(body.get("id") or f"call_{uuid.uuid4().hex[:12]}"),
            "type": "function",
            "function": {
                "name": body["name"],
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
            },
        }
    return body


@require_GET
def tools(request: HttpRequest) -> HttpResponse:
    return JsonResponse(get_registry().to_openai_tools(), safe=False)


@csrf_exempt  # an API for programs, not a form; add your own authentication
@require_POST
def call(request: HttpRequest) -> HttpResponse:
    try:
        body = json.loads(request.body)
    except ValueError:
        return JsonResponse({"error": "the body is not JSON"}, status=400)
    try:
        message = get_registry().execute(_tool_call(body))
    except mcpcall.InvalidRequest as exc:  # JSON, but not a tool call at all
        return JsonResponse({"error": str(exc)}, status=400)
    return JsonResponse(message)


@require_GET
def stats(request: HttpRequest) -> HttpResponse:
    tools = {name: dataclasses.asdict(s) for name, s in get_registry().stats().items()}
    return JsonResponse({"pid": os.getpid(), "tools": tools})


@require_GET
def health(request: HttpRequest) -> HttpResponse:
    registry = get_registry()
    return JsonResponse({"pid": os.getpid(), "servers": registry.servers, "closed": registry.closed})


urlpatterns = [
    path("tools", tools),
    path("call", call),
    path("stats", stats),
    path("health", health),
]

application = WSGIHandler()  # for gunicorn / any WSGI server


def main() -> None:
    """Run a few requests through Django's test client and print the answers."""
    from django.test import Client

    client = Client()
    try:
        names = [tool["function"]["name"] for tool in client.get("/tools").json()]
        print("tools:", ", ".join(names))
        for body in (
            {"name": "mcp__demo__echo", "arguments": {"message": "hello from Django"}},
            {"id": "call_1", "type": "function", "function": {"name": "mcp__demo__add", "arguments": '{"a": 2, "b": 3}'}},
            {"name": "mcp__demo__fail", "arguments": {"message": "on purpose"}},
        ):
            print("call:", client.post("/call", body, content_type="application/json").json())
        print("stats:", json.dumps(client.get("/stats").json()["tools"], sort_keys=True))
    finally:
        close_registry()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        from django.core.management import execute_from_command_line

        execute_from_command_line(sys.argv)
    else:
        main()
