"""examples/celery_app.py with a real Redis broker and a real prefork worker: 100 tool calls, none lost.

The test starts ``redis-server`` on 127.0.0.1 at a free port and ``celery worker
--pool prefork --concurrency 2`` on it, sends the calls by task name (as a
caller on another machine would, without importing the example), and checks
what comes back, which pool process ran what (from the worker's log), that
each pool process started its own demo server after the fork, and that no
demo server outlives the worker. Every demo server of this test carries a
unique ``MCPCALL_TEST_MARKER`` in its environment, so it can be told apart
from any other in /proc.
"""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..conftest import ROOT, child_pythonpath, pid_alive, stop_process, wait_until
from ..redis_server import tail as _tail

pytestmark = pytest.mark.timeout(180)

celery = pytest.importorskip("celery")
redis = pytest.importorskip("redis")
kombu_pools = pytest.importorskip("kombu.pools")

CALLS = 100
WORKER_HOST = "mcpcall-test@127.0.0.1"


# The broker: the session's redis-server (tests/conftest.py, fixture redis_url), emptied for each test.


@pytest.fixture
def client_app(redis_url: str) -> Iterator[Any]:
    """A Celery app for the caller's side: sends tasks by name, reads results; its connections closed after."""
    app = celery.Celery("mcpcall_test_caller", broker=redis_url, backend=redis_url, set_as_current=False)
    app.conf.update(broker_connection_retry_on_startup=True, accept_content=["json"], result_accept_content=["json"])
    try:
        yield app
    finally:
        # Celery closes none of this itself: the result backend's pub/sub and pool, the app's broker and
        # producer pools, kombu's process-wide pools (control.ping uses them); each redis transport's
        # epoll descriptor goes only when its transport is garbage.
        backend = app.backend
        consumer = getattr(backend, "result_consumer", None)
        if consumer is not None:
            consumer.stop()
        pool = backend.client.connection_pool
        pool.disconnect()
        app.amqp.producer_pool.force_close_all()
        app.pool.force_close_all()
        app.close()
        app.amqp._producer_pool = None
        kombu_pools.reset()
        del app, backend, consumer
        gc.collect()
        # celery < 5.7 (5.6 is the last for Python 3.9): results collected just now unsubscribe through the
        # stopped pub/sub, and redis-py opens a new connection for that.
        pool.disconnect()


def _demo_servers(marker: str) -> dict[int, int]:
    """{pid: parent pid} of every live demo server started with this test's marker."""
    found: dict[int, int] = {}
    needle = f"MCPCALL_TEST_MARKER={marker}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            if b"mcpcall.demo_server" not in cmdline:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if needle in environ and pid_alive(pid):
            found[pid] = int(stat[stat.rfind(b")") + 2 :].split()[1])
    return found


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat[stat.rfind(b")") + 2 :].split()[1])


def _call(call_id: str, tool: str, arguments: Any, server: str = "demo") -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": f"mcp__{server}__{tool}", "arguments": text}}


def _start_worker(env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    """``celery worker --pool prefork --concurrency 2`` on the example, its output in ``log_path``."""
    with open(log_path, "ab") as log_file:
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "examples.celery_app", "worker", "--pool", "prefork",
             "--concurrency", "2", "--loglevel", "INFO", "--hostname", WORKER_HOST,
             "--without-gossip", "--without-mingle"],
            cwd=str(ROOT), env=env, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the last resort kills pool processes too
        )


def _wait_ready(client_app: Any, worker: subprocess.Popen[bytes], log_path: Path) -> None:
    """Until the worker answers a ping (bounded; a worker that died says why)."""
    deadline = time.monotonic() + 60
    while not client_app.control.ping(destination=[WORKER_HOST], timeout=1.0):
        assert worker.poll() is None, f"the worker exited with {worker.returncode}:\n{_tail(log_path)}"
        assert time.monotonic() < deadline, f"the worker did not answer a ping in 60 s:\n{_tail(log_path)}"


def _ran_by(log_text: str, task: str) -> dict[str, list[str]]:
    """{task id: [pool process that ran it, ...]} from the worker's log."""
    ran: dict[str, list[str]] = {}
    for match in re.finditer(rf"/(ForkPoolWorker-\d+)\] Task {re.escape(task)}\[([0-9a-f-]+)\] succeeded", log_text):
        ran.setdefault(match.group(2), []).append(match.group(1))
    return ran


def test_celery_prefork_worker_runs_100_tool_calls(tmp_path: Path, redis_url: str, client_app: Any) -> None:
    marker = uuid.uuid4().hex
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"demo": {
        "command": sys.executable, "args": ["-m", "mcpcall.demo_server"],
        "env": {"MCPCALL_TEST_MARKER": "${env:MCPCALL_TEST_MARKER}"},  # set on the worker, expanded per machine
    }}}))
    env = dict(os.environ, MCPCALL_CELERY_BROKER=redis_url, MCPCALL_CONFIG=str(config),
               MCPCALL_TEST_MARKER=marker, PYTHONUNBUFFERED="1")
    env.pop("MCPCALL_CELERY_BACKEND", None)
    env.pop("MCPCALL_TOKEN_REDIS", None)
    log_path = tmp_path / "worker.log"
    worker = _start_worker(env, log_path)
    try:
        _wait_ready(client_app, worker, log_path)

        # 100 calls fanned out as one group, gathered under one bound.
        calls = [_call(f"call_{i}", "echo", {"message": f"message {i}"}) for i in range(CALLS)]
        group = celery.group(client_app.signature("mcpcall.execute_tool_call", args=(call,)) for call in calls)
        started = time.monotonic()
        result = group.apply_async()
        messages = result.get(timeout=90)
        elapsed = time.monotonic() - started
        task_ids = [child.id for child in result.results]
        result.forget()
        assert messages == [{"role": "tool", "tool_call_id": f"call_{i}", "content": f"message {i}"}
                            for i in range(CALLS)], f"took {elapsed:.1f} s"

        # Failures come back as error tool messages, one call or a batch.
        error = client_app.signature("mcpcall.execute_tool_call", args=(_call("bad", "fail", {"message": "nope"}),))
        message = error.apply_async().get(timeout=30)
        assert message["tool_call_id"] == "bad"
        assert message["content"].startswith("Error") and "nope" in message["content"]
        batch = [
            _call("b0", "echo", {"message": "first"}),
            _call("b1", "add", {"a": 2, "b": 3}),
            _call("b2", "fail", {"message": "broken"}),
            _call("b3", "no_such_tool", {}),
            _call("b4", "echo", "{not json"),
        ]
        answers = client_app.signature("mcpcall.execute_many", args=(batch, 30.0)).apply_async().get(timeout=60)
        assert [a["tool_call_id"] for a in answers] == ["b0", "b1", "b2", "b3", "b4"]
        assert answers[0]["content"] == "first" and answers[1]["content"] == "5"
        assert all(a["content"].startswith("Error") for a in answers[2:]), answers
        assert "broken" in answers[2]["content"] and "no tool named" in answers[3]["content"]

        # Each pool process built its own registry after the fork: one demo server each, none in the main process.
        servers = _demo_servers(marker)
        parents = set(servers.values())
        assert len(servers) == 2 and len(parents) == 2, servers
        assert all(_parent(p) == worker.pid for p in parents), (servers, worker.pid)
    finally:
        stop_process(worker, grace=30, group=True)
    assert worker.returncode == 0, f"the worker exited with {worker.returncode}:\n{_tail(log_path)}"

    # The log: every task ran exactly once (none lost, none run twice), and both pool processes ran some.
    log_text = log_path.read_text(errors="replace")
    ran = _ran_by(log_text, "mcpcall.execute_tool_call")
    assert all(len(ran.get(task_id, [])) == 1 for task_id in task_ids), "a task ran twice or not at all"
    by_process: set[str] = {ran[task_id][0] for task_id in task_ids}
    assert len(by_process) == 2, f"only {by_process} ran the calls"
    assert len(re.findall(r"tool registry closed in worker process \d+", log_text)) == 2, _tail(log_path)

    # No demo server outlives the worker.
    assert wait_until(lambda: not _demo_servers(marker), timeout=10), _demo_servers(marker)


def test_celery_workers_share_one_oauth_token_through_redis(tmp_path: Path, redis_url: str, client_app: Any) -> None:
    """A server behind OAuth with rotating refresh tokens: both pool processes use the token a person signed in for
    once (stored in the broker's Redis), and when it is due exactly one of them refreshes it."""
    from dataclasses import replace

    import requests

    from mcpcall.auth.oauth import OAuth
    from mcpcall.auth.redis_store import RedisTokenStore
    from tests.cli.test_cli_login import _MCPHandler
    from tests.servers.oauth_server import OAuthServer

    secret = "fleet-secret-" + uuid.uuid4().hex[:8]

    def follow(url: str) -> str:
        return str(requests.get(url, allow_redirects=False, timeout=5).headers["Location"])

    srv = OAuthServer(clients={"fleet": secret}, refresh_delay=0.5)  # a slow refresh: the other process needs the token meanwhile
    srv.httpd.RequestHandlerClass = _MCPHandler  # an MCP server with a "whoami" tool behind the token check
    with srv, RedisTokenStore(redis_url) as store:
        # A person signs in once, from a machine with a browser, into the workers' Redis (what `login` does).
        with OAuth(client_id="fleet", client_secret=secret, redirect_uri="http://127.0.0.1:9/callback",
                   redirect_handler=follow, token_store=store, timeout=10) as auth:
            assert auth.login(srv.mcp_url) is not None
        signed_in = store.get(srv.base, srv.mcp_url)
        assert signed_in is not None
        store.put(replace(signed_in, expires_at=time.time() + 20))  # time passes: it is due for refresh
        config = tmp_path / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"remote": {
            "url": srv.mcp_url, "oauth": {"clientId": "fleet", "clientSecret": "${env:MCP_FLEET_SECRET}"}}}}))
        env = dict(os.environ, MCPCALL_CELERY_BROKER=redis_url, MCPCALL_CONFIG=str(config), MCP_FLEET_SECRET=secret,
                   PYTHONUNBUFFERED="1")
        env.pop("MCPCALL_CELERY_BACKEND", None)
        env.pop("MCPCALL_TOKEN_REDIS", None)  # the default: the broker's Redis
        log_path = tmp_path / "worker.log"
        worker = _start_worker(env, log_path)
        try:
            _wait_ready(client_app, worker, log_path)
            calls = [_call(f"call_{i}", "whoami", {}, server="remote") for i in range(CALLS)]
            group = celery.group(client_app.signature("mcpcall.execute_tool_call", args=(call,)) for call in calls)
            result = group.apply_async()
            messages = result.get(timeout=90)
            task_ids = [child.id for child in result.results]
            result.forget()
        finally:
            stop_process(worker, grace=30, group=True)
        assert messages == [{"role": "tool", "tool_call_id": f"call_{i}", "content": "you are signed in"}
                            for i in range(CALLS)], _tail(log_path)
        assert srv.refresh_count == 1 and srv.refresh_rejected == 0, (srv.refresh_count, srv.refresh_rejected)
        assert len(srv.authorize_requests) == 1  # only the person's sign-in: no worker asked for one
        stored = store.get(srv.base, srv.mcp_url)
        assert stored is not None and (stored.access_token, stored.refresh_token) == srv.issued[-1]
        assert stored.refresh_token in srv.refresh_tokens  # the rotated refresh token is kept, and live
    ran = _ran_by(log_path.read_text(errors="replace"), "mcpcall.execute_tool_call")
    assert len({ran[task_id][0] for task_id in task_ids if task_id in ran}) == 2, "one pool process ran every call"


def test_tokens_default_to_the_token_file_when_the_broker_is_not_redis(tmp_path: Path) -> None:
    """The token Redis defaults to the broker's URL only when that is a Redis one: with another broker
    (RabbitMQ's amqp://), tasks of servers without OAuth must not fail on a store that cannot be made."""
    script = ("import examples.celery_app as app\n"
              "try:\n"
              "    print(repr(app.token_store()))\n"
              "    print(app.build_registry().servers)\n"
              "finally:\n"
              "    app.close_registry()\n")
    env = dict(os.environ, MCPCALL_CELERY_BROKER="amqp://guest:guest-secret@127.0.0.1:1//",
               PYTHONPATH=child_pythonpath())
    env.pop("MCPCALL_TOKEN_REDIS", None)
    env.pop("MCPCALL_CONFIG", None)
    done = subprocess.run([sys.executable, "-c", script], cwd=str(ROOT), env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "None"  # each machine's token file
    assert "demo" in done.stdout.splitlines()[1]
    # Set to a Redis, the tokens go there whatever the broker is.
    env["MCPCALL_TOKEN_REDIS"] = "redis://127.0.0.1:1/0"
    done = subprocess.run([sys.executable, "-c", script], cwd=str(ROOT), env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "<RedisTokenStore redis://127.0.0.1:1/0 prefix='mcpcall:'>"
