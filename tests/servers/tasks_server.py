"""A modern (2026-07-28) stdio MCP server of the tasks extension, written from its spec text.

``io.modelcontextprotocol/tasks``: a ``tools/call`` from a client that declares
the extension in its per-request capabilities may be answered with
``resultType: "task"``; the client polls ``tasks/get``, answers
``inputRequests`` with ``tasks/update`` and may ``tasks/cancel``. Stdlib only;
one thread (a task's progress is a matter of the clock).

Tools:

- ``long(seconds)``: a task that completes after ``seconds`` with the text "done after N s";
  without the extension it answers at once with the same text (it just waits);
- ``ask(question)``: a task that needs input: ``input_required`` with an elicitation until a
  ``tasks/update`` answers it, then completes with the answer;
- ``broken()``: a task that fails with JSON-RPC error -32603 "the backend is down";
- ``quick()``: answered at once, never a task, whatever the client declares.

``tasks/get`` answers carry ``pollIntervalMs`` (``--poll-ms``, default 50). The server writes
"tasks/get <id> <status>" to stderr for each poll and "cancelled <id>" for each cancel, so
tests can see how often it was polled.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
import uuid
from typing import Any

TASKS = "io.modelcontextprotocol/tasks"
VERSION = "2026-07-28"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


class Server:
    def __init__(self, poll_ms: int) -> None:
        self.poll_ms = poll_ms
        self.tasks: dict[str, dict[str, Any]] = {}

    def send(self, message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    def ok(self, rid: Any, result: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete", **result}})

    def error(self, rid: Any, code: int, message: str) -> None:
        self.send({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})

    def view(self, task: dict[str, Any]) -> dict[str, Any]:
        """The task as the spec's DetailedTask, its status advanced by the clock."""
        if task["status"] == "working" and task["kind"] == "long" and time.monotonic() >= task["due"]:
            task["status"] = "completed"
            task["result"] = {"content": [{"type": "text", "text": f"done after {task['seconds']:g} s"}], "isError": False}
        if task["status"] == "working" and task["kind"] == "broken" and time.monotonic() >= task["due"]:
            task["status"] = "failed"
            task["error"] = {"code": -32603, "message": "the backend is down"}
            task["statusMessage"] = "Tool execution failed: the backend is down"
        out = {k: task[k] for k in ("taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs")}
        for key in ("result", "error", "inputRequests", "statusMessage"):
            if key in task:
                out[key] = task[key]
        return out

    def create(self, kind: str, args: dict[str, Any]) -> dict[str, Any]:
        task_id = uuid.uuid4().hex
        task: dict[str, Any] = {
            "taskId": task_id, "status": "working", "createdAt": now_iso(), "lastUpdatedAt": now_iso(),
            "ttlMs": 60_000, "pollIntervalMs": self.poll_ms, "kind": kind,
            "seconds": float(args.get("seconds", 0.3)), "due": time.monotonic() + float(args.get("seconds", 0.3)),
        }
        if kind == "broken":
            task["due"] = time.monotonic() + 0.1
        if kind == "ask":
            task["status"] = "input_required"
            task["inputRequests"] = {
                "q1": {"method": "elicitation/create", "params": {
                    "mode": "form", "message": str(args.get("question", "?")),
                    "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}}}},
            }
        self.tasks[task_id] = task
        return task

    def handle(self, m: dict[str, Any]) -> None:
        method, rid, params = m.get("method"), m.get("id"), m.get("params") or {}
        if rid is None:
            return
        if method == "server/discover":
            self.ok(rid, {"supportedVersions": [VERSION], "ttlMs": 0, "cacheScope": "public",
                          "capabilities": {"tools": {}, "extensions": {TASKS: {}}},
                          "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "tasks-test-server", "version": "1"}}})
        elif method == "tools/list":
            tools = [{"name": name, "inputSchema": {"type": "object"}} for name in ("long", "ask", "broken", "quick")]
            self.ok(rid, {"tools": tools, "ttlMs": 0, "cacheScope": "public"})
        elif method == "tools/call":
            name, args = params.get("name"), params.get("arguments") or {}
            caps = (params.get("_meta") or {}).get(META_CAPS) or {}
            declared = TASKS in (caps.get("extensions") or {})
            if name == "quick" or (name == "long" and not declared):
                if name == "long":
                    time.sleep(float(args.get("seconds", 0.3)))
                self.ok(rid, {"content": [{"type": "text", "text": "quick" if name == "quick" else "done at once"}]})
            elif not declared:
                self.send({"jsonrpc": "2.0", "id": rid, "error": {
                    "code": -32003, "message": "Missing required client capability",
                    "data": {"requiredCapabilities": {"extensions": {TASKS: {}}}}}})
            elif name in ("long", "ask", "broken"):
                task = self.create(name, args)
                self.send({"jsonrpc": "2.0", "id": rid, "result": {"resultType": "task", **self.view(task)}})
            else:
                self.error(rid, -32602, f"unknown tool {name}")
        elif method in ("tasks/get", "tasks/update", "tasks/cancel"):
            task = self.tasks.get(params.get("taskId"))
            if task is None:
                self.error(rid, -32602, "Failed to retrieve task: Task not found")
                return
            if method == "tasks/get":
                view = self.view(task)
                print(f"tasks/get {task['taskId']} {view['status']}", file=sys.stderr, flush=True)
                self.ok(rid, view)
            elif method == "tasks/update":
                answer = ((params.get("inputResponses") or {}).get("q1") or {}).get("content") or {}
                if task["status"] == "input_required":
                    task.pop("inputRequests", None)
                    task["status"] = "completed"
                    task["result"] = {"content": [{"type": "text", "text": f"answer: {answer.get('answer')}"}]}
                    task["lastUpdatedAt"] = now_iso()
                self.ok(rid, {})
            else:
                if task["status"] not in ("completed", "failed", "cancelled"):
                    task["status"] = "cancelled"
                print(f"cancelled {task['taskId']}", file=sys.stderr, flush=True)
                self.ok(rid, {})
        else:
            self.error(rid, -32601, f"Method not found: {method}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--poll-ms", type=int, default=50)
    server = Server(parser.parse_args().poll_ms)
    for line in sys.stdin:
        if line.strip():
            server.handle(json.loads(line))


if __name__ == "__main__":
    main()
