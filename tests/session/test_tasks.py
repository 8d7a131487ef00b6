"""The tasks extension (modern era) through the public API, against tests/servers/tasks_server.py.

``client.call_tool(name, args, task=True)`` returns a :class:`mcpcall.Task`,
polled with ``tasks/get`` at the server's ``pollIntervalMs`` from the shared
scheduler thread. The server writes "tasks/get <id> <status>" and
"cancelled <id>" to its stderr, collected here with ``stderr=list.append``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import CancelledError, Future
from typing import Any, List

import pytest

import mcpcall
from mcpcall import CallToolResult, ConnectionClosed, RequestTimeout, RPCError, Task
from tests.conftest import SERVERS, wait_until

pytestmark = pytest.mark.timeout(60)


def tasks_argv(poll_ms: int = 50) -> List[str]:
    return [sys.executable, str(SERVERS / "tasks_server.py"), "--poll-ms", str(poll_ms)]


class Server:
    """A connected client of the tasks server and the server's stderr lines."""

    def __init__(self, poll_ms: int = 50, timeout: float = 20, **options: Any) -> None:
        self.lines: List[str] = []
        self.client = mcpcall.connect(tasks_argv(poll_ms), stderr=self.lines.append, timeout=timeout, **options)

    def polls(self, task_id: str) -> List[str]:
        """The statuses the server reported, one per tasks/get of ``task_id``."""
        return [line.split()[2] for line in list(self.lines) if line.startswith(f"tasks/get {task_id} ")]

    def saw(self, line: str, timeout: float = 10.0) -> bool:
        return wait_until(lambda: line in self.lines, timeout)


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        s.client.close()


def test_long_task_completes(server: Server) -> None:
    # Guards: a task-augmented call returns a Task at once (working), which is polled to completed and yields the text.
    task = server.client.call_tool("long", {"seconds": 0.4}, task=True)
    assert isinstance(task, Task)
    assert isinstance(task.task_id, str) and task.task_id
    first = task.status()
    assert first is not None and first.status == "working" and not first.done
    assert first.poll_interval_ms == 50 and first.task_id == task.task_id
    assert not task.done()
    result = task.result(15)
    assert isinstance(result, CallToolResult)
    assert result.text == "done after 0.4 s"
    assert task.done()
    final = task.status()
    assert final is not None and final.status == "completed" and final.done
    assert server.saw(f"tasks/get {task.task_id} completed")
    polls = server.polls(task.task_id)
    assert polls[0] == "working" and polls[-1] == "completed"
    assert polls.count("completed") == 1  # no poll after the end


def test_polling_follows_poll_interval() -> None:
    # Guards: tasks/get is sent about every pollIntervalMs (neither a flood nor a single late poll), and a longer
    # interval means fewer polls for the same task length.
    counts = {}
    for poll_ms in (50, 250):
        s = Server(poll_ms)
        try:
            task = s.client.call_tool("long", {"seconds": 1.0}, task=True)
            assert task.result(20).text == "done after 1 s"
            assert task.task_id is not None
            assert s.saw(f"tasks/get {task.task_id} completed")
            counts[poll_ms] = len(s.polls(task.task_id))
        finally:
            s.client.close()
    # 1.0 s / 50 ms = 20 polls, 1.0 s / 250 ms = 4 (+1 for the last); bounds are generous
    assert 6 <= counts[50] <= 40, counts
    assert 2 <= counts[250] <= 10, counts
    assert counts[250] < counts[50], counts


def test_concurrent_tasks_share_threads(server: Server) -> None:
    # Guards: 20 tasks in flight are polled by the shared scheduler, not a thread per task.
    server.client.call_tool("quick", {})  # every thread the client ever needs is running now
    baseline = len(threading.enumerate())
    tasks = [server.client.call_tool("long", {"seconds": 1.0 + i / 100}, task=True) for i in range(20)]
    peak = baseline
    deadline = time.monotonic() + 30
    while not all(t.done() for t in tasks) and time.monotonic() < deadline:
        peak = max(peak, len(threading.enumerate()))
        time.sleep(0.02)
    results = [t.result(15).text for t in tasks]
    assert results == [f"done after {1.0 + i / 100:g} s" for i in range(20)]
    assert peak - baseline <= 3, (baseline, peak, sorted(t.name for t in threading.enumerate()))
    assert len({t.task_id for t in tasks}) == 20
    for t in tasks:
        assert len(server.polls(t.task_id or "")) >= 2  # each was polled, not only the first


def test_input_required_is_answered_by_elicitation_once() -> None:
    # Guards: an input_required task's inputRequests go to elicitation= on the callbacks thread, once per key,
    # and the answer (tasks/update) lets the task complete.
    calls: List[tuple] = []

    def elicit(params: dict) -> dict:
        calls.append((threading.current_thread().name, dict(params)))
        return {"action": "accept", "content": {"answer": "42"}}

    s = Server(elicitation=elicit)
    try:
        task = s.client.call_tool("ask", {"question": "meaning of life?"}, task=True)
        assert task.result(15).text == "answer: 42"
        status = task.status()
        assert status is not None and status.status == "completed"
        assert task.task_id is not None and s.saw(f"tasks/get {task.task_id} completed")
    finally:
        s.client.close()
    assert len(calls) == 1, calls
    thread_name, params = calls[0]
    assert thread_name.startswith("mcpcall-callbacks-"), thread_name
    assert params["message"] == "meaning of life?" and params["mode"] == "form"


def test_failed_task_raises_rpc_error(server: Server) -> None:
    # Guards: a task that ends failed raises its JSON-RPC error (code, message) from result().
    task = server.client.call_tool("broken", {}, task=True)
    with pytest.raises(RPCError) as info:
        task.result(15)
    assert info.value.code == -32603
    assert "the backend is down" in str(info.value)
    assert task.done()
    status = task.status()
    assert status is not None and status.status == "failed"
    with pytest.raises(RPCError):
        task.future().result(0)


def test_cancel_sends_tasks_cancel(server: Server) -> None:
    # Guards: cancel() sends tasks/cancel for the task, and the handle ends cancelled (result() raises
    # CancelledError); polling stops; a second cancel() reports the task had ended.
    task = server.client.call_tool("long", {"seconds": 30}, task=True)
    assert task.task_id is not None
    assert server.saw(f"tasks/get {task.task_id} working")  # it is being polled
    assert task.cancel() is True
    assert server.saw(f"cancelled {task.task_id}")
    assert task.done()
    assert task.future().cancelled()
    status = task.status()
    assert status is not None and status.status == "cancelled" and status.done
    with pytest.raises(CancelledError):
        task.result(5)
    assert task.cancel() is False
    assert sum(1 for line in server.lines if line == f"cancelled {task.task_id}") == 1
    polls = len(server.polls(task.task_id))
    time.sleep(0.3)  # six poll intervals
    assert len(server.polls(task.task_id)) <= polls + 1  # at most one that was already in flight


def test_quick_tool_is_done_at_once(server: Server) -> None:
    # Guards: a server answering a task-augmented call directly gives a Task that is already done, without an id.
    task = server.client.call_tool("quick", {}, task=True)
    assert isinstance(task, Task)
    assert task.done()
    assert task.task_id is None and task.status() is None
    assert task.result(0).text == "quick"
    assert task.future().done()
    assert task.cancel() is False


def test_long_without_task_is_a_plain_result(server: Server) -> None:
    # Guards: without task=True the extension is not declared and call_tool returns a CallToolResult, no polling.
    result = server.client.call_tool("long", {"seconds": 0.2})
    assert isinstance(result, CallToolResult)
    assert result.text == "done at once"
    assert not any(line.startswith("tasks/get") for line in server.lines)


def test_result_timeout_leaves_the_task_running(server: Server) -> None:
    # Guards: result(timeout) too short raises RequestTimeout (a TimeoutError) but the task goes on and can be waited for.
    task = server.client.call_tool("long", {"seconds": 1.5}, task=True)
    try:
        task.result(0.2)
        raised: BaseException | None = None
    except Exception as exc:  # noqa: BLE001 - checked below
        raised = exc
    assert isinstance(raised, RequestTimeout), repr(raised)
    assert isinstance(raised, TimeoutError)
    assert not task.done()
    assert task.result(15).text == "done after 1.5 s"


def test_close_fails_pending_task() -> None:
    # Guards: closing the client ends a pending task's Future with ConnectionClosed (nobody waits forever).
    s = Server()
    try:
        task = s.client.call_tool("long", {"seconds": 30}, task=True)
        assert task.task_id is not None and s.saw(f"tasks/get {task.task_id} working")
    finally:
        s.client.close()
    assert wait_until(task.done, 10)
    with pytest.raises(ConnectionClosed):
        task.result(5)
    assert isinstance(task.future().exception(0), ConnectionClosed)


def test_future_done_callbacks_run(server: Server) -> None:
    # Guards: task.future() is a concurrent.futures.Future whose done-callbacks run on completion (and at once
    # when added after it).
    task = server.client.call_tool("long", {"seconds": 0.3}, task=True)
    future = task.future()
    assert isinstance(future, Future)
    seen: List[Any] = []
    ran = threading.Event()

    def callback(f: Future) -> None:
        seen.append((f, f.result().text))
        ran.set()

    future.add_done_callback(callback)
    assert task.result(15).text == "done after 0.3 s"
    assert ran.wait(10)
    assert seen == [(future, "done after 0.3 s")]
    late: List[Any] = []
    future.add_done_callback(late.append)
    assert late == [future]


def test_future_done_callback_runs_on_callbacks_thread() -> None:
    # Guards: the thread model: a task's done-callback is user code, so it runs on the callbacks thread (as a
    # RequestFuture's does) and may call the client without stalling it.
    s = Server(timeout=3)
    seen: List[Any] = []
    ran = threading.Event()

    def callback(f: Future) -> None:
        seen.append(threading.current_thread().name)
        try:
            seen.append(s.client.call_tool("quick", {}).text)
        except Exception as exc:  # noqa: BLE001 - checked below
            seen.append(repr(exc))
        ran.set()

    try:
        task = s.client.call_tool("long", {"seconds": 0.2}, task=True)
        task.future().add_done_callback(callback)
        assert task.result(15).text == "done after 0.2 s"
        assert ran.wait(15)
    finally:
        s.client.close()
    assert seen[0].startswith("mcpcall-callbacks-"), seen
    assert seen[1] == "quick", seen
