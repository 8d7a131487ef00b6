"""Tasks: tool calls that finish later, in both eras.

**Modern** (the ``io.modelcontextprotocol/tasks`` extension, 2026-07-28):

``client.call_tool(name, args, task=True)`` declares the extension on that one
request. The server decides: it answers with the result (the :class:`Task`
is done at once) or with ``resultType: "task"`` and a task id. Then the task
is polled with ``tasks/get`` at the server's ``pollIntervalMs``; the polls are
timed by the shared scheduler thread (never a thread per task) and sent from
it, which only queues them. A task that needs input (``input_required``) is
answered by the client's handlers on the callbacks thread and ``tasks/update``;
each input key is answered once. ``Task.cancel()`` sends ``tasks/cancel``.
The final ``CallToolResult`` (or the JSON-RPC error of a failed task) ends the
task's Future.

**Legacy** (2025-11-25, a server declaring ``tasks.requests.tools.call``): the
call carries ``task: {}`` and is answered with a ``CreateTaskResult``; one
``tasks/result`` request then waits for the outcome (the server sends what it
needs to ask as ordinary requests meanwhile, answered by the handlers), while
``tasks/get`` polls keep :meth:`Task.status` fresh.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import threading
from collections.abc import Mapping
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import field
from typing import Any, Callable

from .. import jsonrpc
from ..dispatcher import RequestFuture
from ..errors import ConnectionClosed, MCPError, ProtocolError, RequestTimeout, RPCError
from ..scheduler import get_scheduler
from ..types import CallToolResult
from ..types._record import optional_int, optional_str, record, require_str
from .calls import Call, Caller
from .inbound import input_requests

__all__ = ["TERMINAL", "Task", "TaskStatus", "Tasks", "parse_task_status"]

log = logging.getLogger("mcpcall.client")

TERMINAL = frozenset({"completed", "failed", "cancelled"})
_DEFAULT_POLL = 1.0
_MIN_POLL = 0.05
_MAX_POLL = 60.0


@record
class TaskStatus:
    """A task as the server last described it."""

    task_id: str
    status: str
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def done(self) -> bool:
        """True in a terminal status (completed, failed, cancelled)."""
        return self.status in TERMINAL


def parse_task_status(data: Any, server: str = "") -> TaskStatus:
    """A :class:`TaskStatus` from a ``CreateTaskResult``, a ``tasks/get`` result or a ``notifications/tasks``."""
    return TaskStatus(
        task_id=require_str(data, "taskId", "a task", server),
        status=require_str(data, "status", "a task", server),
        status_message=optional_str(data, "statusMessage"),
        created_at=optional_str(data, "createdAt"),
        last_updated_at=optional_str(data, "lastUpdatedAt"),
        ttl_ms=_first_int(data, "ttlMs", "ttl"),  # 2026-07-28 names, then 2025-11-25's
        poll_interval_ms=_first_int(data, "pollIntervalMs", "pollInterval"),
        raw=data,
    )


class Task:
    """A handle on one task-augmented tool call; thread-safe."""

    def __init__(self, tasks: Tasks, tool: str, status: TaskStatus | None, *, legacy: bool = False) -> None:
        self._tasks = tasks
        self.tool = tool
        self._status = status
        self.legacy = legacy
        self._result_request: Future[Any] | None = None  # legacy: the tasks/result waiting for the outcome
        # Its done-callbacks go to the client's callbacks thread, like every request's.
        self._future: Future[CallToolResult] = RequestFuture("tools/call", runner=tasks.caller.callbacks)
        self._answered: set[str] = set()  # input keys already answered (each once per task)
        self._lock = threading.Lock()
        self._polling = False
        self._cancel_sent = False

    def __repr__(self) -> str:
        status = self._status
        what = f"{status.task_id} {status.status}" if status is not None else "done at once"
        return f"<mcpcall.Task {self.tool!r} {what}>"

    @property
    def task_id(self) -> str | None:
        """The server's id for the task (None when the server answered at once)."""
        return self._status.task_id if self._status is not None else None

    def status(self) -> TaskStatus | None:
        """The status last seen (None when the server answered at once, without a task)."""
        return self._status

    def done(self) -> bool:
        return self._future.done()

    def result(self, timeout: float | None = None) -> CallToolResult:
        """The tool's result, waiting at most ``timeout`` seconds (None: until the task ends).

        A failed task raises its :class:`~mcpcall.errors.RPCError`; a
        cancelled one ``concurrent.futures.CancelledError``; when ``timeout``
        passes first, :class:`RequestTimeout` (the task goes on).
        """
        try:
            return self._future.result(timeout)
        except FutureTimeout:  # concurrent.futures' own class before Python 3.11
            if self._future.done():
                raise
            raise RequestTimeout(
                f"task {self.task_id} of tool {self.tool!r} on server {self._tasks.name!r} is still "
                f"{self._status.status if self._status else 'running'} after {timeout:g} s (it goes on)",
                method="tasks/get", timeout=timeout or 0.0,
            ) from None

    def future(self) -> Future[CallToolResult]:
        """A ``concurrent.futures.Future`` of the result (its done-callbacks run on the client's callbacks thread)."""
        return self._future

    def cancel(self, timeout: float | None = None) -> bool:
        """Ask the server to cancel the task (``tasks/cancel``); the handle ends cancelled.

        Returns False when the task had already ended. The server may still
        finish the work: cancellation is cooperative.
        """
        # The handle ends cancelled first: an answer already on its way (a legacy tasks/result,
        # which a cancel makes the server answer with an error) can no longer win.
        if self._future.done() or not self._future.cancel():
            return False
        task_id = self.task_id
        with self._lock:
            first = not self._cancel_sent
            self._cancel_sent = True
        waiting = self._result_request
        if waiting is not None:
            waiting.cancel()
        if task_id is not None and first:
            try:
                answer = self._tasks.caller.result(Call("tasks/cancel", {"taskId": task_id}, timeout), cache=False)
            except MCPError as exc:
                log.info("server %r: tasks/cancel of %s failed: %s", self._tasks.name, task_id, str(exc))
            else:
                self._cancelled(answer)
        return True

    def _cancelled(self, answer: Any) -> None:
        """The status after ``tasks/cancel``: what the server answered (2025-11-25 sends the task), else cancelled."""
        status = self._status
        if isinstance(answer, dict) and answer.get("taskId") == self.task_id and isinstance(answer.get("status"), str):
            try:
                self._status = parse_task_status(answer, self._tasks.name)
                return
            except ProtocolError:
                pass
        if status is not None and not status.done:
            self._status = dataclasses.replace(status, status="cancelled")

    # -- driven by Tasks ---------------------------------------------------------------------

    def _update(self, status: TaskStatus) -> None:
        self._status = status


class Tasks:
    """The tasks of one client: creating handles, polling, answering input, finishing."""

    def __init__(self, caller: Caller, parse_result: Callable[[dict[str, Any], str, Any], CallToolResult]) -> None:
        self.caller = caller
        self.name = caller.name
        self._parse_result = parse_result
        self._lock = threading.Lock()
        self._live: dict[str, Task] = {}

    # -- a tools/call answered with a task (reader thread) --------------------------------

    def on_create(self, result: dict[str, Any], future: RequestFuture, tool: str) -> Task:
        """The transform of a ``resultType: "task"`` answer: a handle that polls until the end."""
        status = parse_task_status(result, self.name)
        task = Task(self, tool, status)
        with self._lock:
            self._live[status.task_id] = task
        Future.add_done_callback(task._future, lambda _: self._forget(status.task_id))
        self._advance(task, status)
        return task

    def on_legacy_result(self, result: dict[str, Any], tool: str) -> Task:
        """The transform of a legacy task-augmented ``tools/call`` (reader thread)."""
        created = result.get("task")
        if not isinstance(created, dict):
            return self.done_at_once(result, tool)  # the server ran it at once
        status = parse_task_status(created, self.name)
        task = Task(self, tool, status, legacy=True)
        with self._lock:
            self._live[status.task_id] = task
        Future.add_done_callback(task._future, lambda _: self._forget(status.task_id))
        # Sending may wait (a legacy HTTP session renewal): from the callbacks thread, not this one.
        if not self.caller.callbacks.submit(self._await_legacy_result, task):
            _fail(task._future, ConnectionClosed(f"client for server {self.name!r} was closed"))
        self._schedule_poll(task, status)
        return task

    def _await_legacy_result(self, task: Task) -> None:
        """One ``tasks/result``: it waits until the task ends and answers with the call's own result."""
        task_id = task.task_id
        if task._future.done() or task_id is None:
            return
        call = Call("tasks/result", {"taskId": task_id}, math.inf,
                    transform=lambda result, _: self._finish_with(task, result))
        try:
            request = self.caller.send(call)
        except BaseException as exc:  # noqa: BLE001 - the task's Future carries it
            _fail(task._future, exc)
            return
        task._result_request = request
        Future.add_done_callback(request, lambda f: self._poll_failed(task, f, final=True))

    def _finish_with(self, task: Task, raw: dict[str, Any]) -> None:
        try:
            result = self._parse_result(raw, task.tool, task._future)  # outputSchema: checked where it is read
        except BaseException as exc:  # noqa: BLE001 - the task's Future carries it
            _fail(task._future, exc)
            return
        status = task._status
        if status is not None and not status.done:  # legacy: the outcome came before a poll saw it
            task._update(dataclasses.replace(status, status="completed"))
        with contextlib.suppress(InvalidStateError):
            task._future.set_result(result)

    def done_at_once(self, raw: dict[str, Any], tool: str) -> Task:
        """The server answered the call itself: a handle that is already done (``outputSchema``: checked where read)."""
        task = Task(self, tool, None)
        task._future.set_result(self._parse_result(raw, tool, task._future))
        return task

    def _forget(self, task_id: str) -> None:
        with self._lock:
            self._live.pop(task_id, None)

    # -- the polling loop -------------------------------------------------------------------

    def _advance(self, task: Task, status: TaskStatus) -> None:
        """Act on a status (reader thread or scheduler): finish, answer input, or poll again."""
        task._update(status)
        future = task._future
        if future.done():
            return
        if task.legacy:  # the outcome comes with tasks/result; polls only keep the status fresh
            if not status.done:
                self._schedule_poll(task, status)
            return
        if status.status == "completed":
            self._finish(task, status)
        elif status.status == "failed":
            _fail(future, self._failure(task, status))
        elif status.status == "cancelled":
            future.cancel()
        elif status.status == "input_required":
            if not self.caller.callbacks.submit(self._answer_inputs, task, status):
                _fail(future, ConnectionClosed(f"client for server {self.name!r} was closed"))
        else:
            self._schedule_poll(task, status)

    def _finish(self, task: Task, status: TaskStatus) -> None:
        raw = status.raw.get("result")
        if not isinstance(raw, dict):
            _fail(task._future, ProtocolError(f"server {self.name!r} said task {status.task_id} completed without a result"))
            return
        self._finish_with(task, raw)

    def _failure(self, task: Task, status: TaskStatus) -> BaseException:
        error = status.raw.get("error")
        if isinstance(error, dict) and isinstance(error.get("code"), int):
            message = error.get("message")
            return RPCError(error["code"], message if isinstance(message, str) else jsonrpc.excerpt(message), error.get("data"),
                            server=self.name, method="tools/call")
        why = status.status_message or "no error given"
        return ProtocolError(f"server {self.name!r}: task {status.task_id} of tool {task.tool!r} failed ({why})")

    def _schedule_poll(self, task: Task, status: TaskStatus) -> None:
        ms = status.poll_interval_ms
        interval = min(ms, _MAX_POLL * 1000) / 1000.0 if ms is not None else _DEFAULT_POLL  # capped first: any integer divides
        delay = min(max(interval, _MIN_POLL), _MAX_POLL)
        with task._lock:
            if task._polling:
                return
            task._polling = True
        get_scheduler().schedule(delay, lambda: self._poll(task))

    def _poll(self, task: Task) -> None:
        """On the scheduler thread: queue a ``tasks/get``.

        A modern request is only queued (it never waits). A legacy one may first
        have to renew a lost HTTP session, which waits: that is sent from the
        callbacks thread, never from the scheduler.
        """
        with task._lock:
            task._polling = False
        if task._future.done():
            return
        if task.legacy:
            if not self.caller.callbacks.submit(self._send_poll, task):
                _fail(task._future, ConnectionClosed(f"client for server {self.name!r} was closed"))
            return
        self._send_poll(task)

    def _send_poll(self, task: Task) -> None:
        if task._future.done():
            return
        task_id = task.task_id
        call = Call("tasks/get", {"taskId": task_id}, None, transform=lambda result, _: self._polled(task, result))
        try:
            future = self.caller.send(call)
        except BaseException as exc:  # noqa: BLE001 - the task's Future carries it
            _fail(task._future, exc)
            return
        Future.add_done_callback(future, lambda f: self._poll_failed(task, f))

    def _polled(self, task: Task, result: dict[str, Any]) -> None:
        """The transform of a ``tasks/get`` answer (reader thread)."""
        self._advance(task, parse_task_status(result, self.name))

    def _poll_failed(self, task: Task, future: Future[Any], *, final: bool = False) -> None:
        if future.cancelled():
            return
        error = future.exception()
        if error is None or task._future.done():
            return
        if not final and task.legacy:
            return  # a failed status poll; tasks/result still decides
        if isinstance(error, RequestTimeout) and not final:  # a slow poll: try again
            status = task._status
            if status is not None:
                self._schedule_poll(task, status)
            return
        _fail(task._future, error)

    def _answer_inputs(self, task: Task, status: TaskStatus) -> None:
        """On the callbacks thread: answer what has not been answered, then poll on."""
        requests = status.raw.get("inputRequests")
        try:
            input_requests(self.name, "tasks/get", requests)  # a shape the server got wrong fails the task
            with task._lock:  # claimed before any handler runs: a repeated status never asks twice
                pending = {k: v for k, v in requests.items() if k not in task._answered} if isinstance(requests, dict) else {}
                task._answered.update(pending)
            if pending:
                responses = self.caller.answer_inputs(pending, task._future)
                if responses and not task._future.done():
                    self.caller.result(Call("tasks/update", {"taskId": status.task_id, "inputResponses": responses}, None),
                                       cache=False)
        except BaseException as exc:  # noqa: BLE001 - a handler's failure belongs to the task
            _fail(task._future, exc)
            self._abandon(status.task_id)
            return
        self._schedule_poll(task, status)

    def _abandon(self, task_id: str) -> None:
        """Tell the server a task waiting for input we cannot give is given up (``tasks/cancel``, not waited for)."""
        try:
            self.caller.send(Call("tasks/cancel", {"taskId": task_id}, None))
        except MCPError as exc:
            self.caller.callbacks.log(log, logging.DEBUG, "server %r: tasks/cancel of %s failed: %s", self.name, task_id,
                                      str(exc))

    # -- pushed status (subscriptions) ----------------------------------------------------

    def on_notification(self, params: dict[str, Any]) -> None:
        """``notifications/tasks`` (reader thread): the same as a poll's answer."""
        task_id = params.get("taskId")
        with self._lock:
            task = self._live.get(task_id) if isinstance(task_id, str) else None
        if task is not None:
            try:
                self._advance(task, parse_task_status(params, self.name))
            except ProtocolError as exc:
                self.caller.callbacks.log(log, logging.DEBUG, "server %r: a task notification was malformed: %s",
                                          self.name, str(exc))  # on the reader: handed to the callbacks thread

    def close(self) -> None:
        """The client closed: every task handle still waiting fails."""
        with self._lock:
            live = list(self._live.values())
            self._live.clear()
        for task in live:
            _fail(task._future, ConnectionClosed(f"client for server {self.name!r} was closed"))


def _first_int(data: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = optional_int(data, key)
        if value is not None:
            return value
    return None


def _fail(future: Future[Any], exc: BaseException) -> None:
    with contextlib.suppress(InvalidStateError):  # done already, or done meanwhile
        future.set_exception(exc)
