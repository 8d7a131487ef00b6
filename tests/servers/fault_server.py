"""A misbehaving MCP stdio server for tests: the demo server plus fault modes.

Run it as ``python tests/servers/fault_server.py --fault MODE [--fault MODE ...]``
(from any directory). Without ``--fault`` it is the demo server
(:mod:`mcpcall.demo_server`, same tools, both eras, ``--page-size`` works too).

Fault modes:

``hang``              answer initialize/discover (and the rest) normally, never answer tools/call
``hang-all``          never answer anything at all, but keep reading stdin
``crash-on-call``     on tools/call print "fatal: crashing on purpose" to stderr and exit 3
``exit-at-start``     print "error: missing API key DEMO_API_KEY" to stderr and exit 2 at once
``garbage``           before every response write non-JSON lines, ``{"hello": 1}`` and an empty line
``stderr-flood``      on tools/call write 20 MB to stderr (1 KB lines and one 2 MB line) first
``ignore-sigterm``    ignore SIGTERM and stay alive after stdin EOF (only SIGKILL ends it)
``ignore-stdin-eof``  stay alive after stdin EOF (SIGTERM still ends it)
``grandchild``        spawn ``python -c "import time; time.sleep(600)"`` at start, in the same process
                      group and inheriting stdin/stdout/stderr (``--grandchild-stdio devnull`` to
                      detach them); its pid goes to ``--pidfile PATH``
``duplicate``         send every response twice
``unknown-id``        before every response send a response for id 999999, which nobody asked for
``out-of-order``      hold tools/call responses and release each batch of ``--batch N`` (default 2)
                      in reverse order
``big-line``          answer the first ``--big-count`` (default 1; 0 = every) echo calls with a
                      single line of exactly ``--big-bytes`` bytes (default 50 MB) before the newline
``slow-init``         sleep ``--delay S`` (default 2) before answering initialize and server/discover
``no-stdin-read``     after answering initialize or server/discover, stop reading stdin for good
``legacy-only``       pure legacy server: server/discover (even with modern _meta) gets -32601
``legacy-silent``     pure legacy server that ignores every request before initialize (no answer)
``modern-only``       pure modern server: initialize gets -32601 naming the supported versions
``bad-answers``       tools/call of a tool named after a broken answer gets that answer as its one line:
                      ``null-result``, ``no-code`` (an error without a code), ``array-result``,
                      ``bad-utf8`` (a byte that is not UTF-8 inside the line), ``batch`` (the answer in a
                      one-element JSON array); ``nested`` writes one line of 100,000 nested arrays,
                      then answers normally
``setsid-helper``     at start, spawn a helper in a session of its own that holds our stdout and
                      stderr (``sleep 600``), its pid to ``--pidfile PATH``; close() cannot kill it
``finish-on-eof``     a careful server: on stdin EOF, finish the calls in flight (a ``slow`` call runs
                      to its end unless cancelled) before exiting; ``--cancel-log PATH`` gets one line
                      per ``notifications/cancelled`` received (the request id, as JSON)
``banner``            write ``--banner-lines N`` (default 1) lines that are not JSON to stdout at start,
                      then serve normally (a server that prints a banner, then speaks MCP)
``garbage-only``      write lines that are not JSON (one with control characters) to stdout for every
                      request, and never answer anything
``late-answer``       answer the first tools/call ``--delay`` seconds late, even if it was cancelled meanwhile
``truncated``         answer the first tools/call with its line cut in the middle (the newline kept)
``close-stdout``      on the first tools/call, close stdout and keep running (reading stdin until EOF)
``progress-flood``    before answering a tools/call, send ``--flood N`` (default 20000) progress notifications
                      for it (with the request's progress token; none without one)
``log-flood``         before answering a tools/call, send ``--flood N`` ``notifications/message`` (level info)
``list-changed-flood`` declare ``tools.listChanged`` and, before answering a tools/call, send ``--flood N``
                      ``notifications/tools/list_changed``; modern: answers ``subscriptions/listen`` with its
                      acknowledgement (never with a response) and tags each notification with its id

Modes combine (``--fault garbage --fault duplicate``). The hooks it uses are
:meth:`DemoServer.handle`, :meth:`DemoServer.send`, :meth:`DemoServer.on_eof` and
the ``legacy``/``modern`` constructor flags.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

try:
    from mcpcall.demo_server import META_PROTOCOL_VERSION, DemoServer, build_arg_parser
except ImportError:  # run as a script from a checkout: put the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from mcpcall.demo_server import META_PROTOCOL_VERSION, DemoServer, build_arg_parser

#: The ``_meta`` key that tags a modern subscription's notifications (the spec's; the server keeps its own copy).
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

JSON = dict[str, Any]

MODES = (
    "hang",
    "hang-all",
    "crash-on-call",
    "exit-at-start",
    "garbage",
    "stderr-flood",
    "ignore-sigterm",
    "ignore-stdin-eof",
    "grandchild",
    "duplicate",
    "unknown-id",
    "out-of-order",
    "big-line",
    "slow-init",
    "no-stdin-read",
    "legacy-only",
    "legacy-silent",
    "modern-only",
    "bad-answers",
    "setsid-helper",
    "finish-on-eof",
    "banner",
    "garbage-only",
    "late-answer",
    "truncated",
    "close-stdout",
    "progress-flood",
    "log-flood",
    "list-changed-flood",
)

FLOODS = ("progress-flood", "log-flood", "list-changed-flood")

GARBAGE = b'this is not JSON\n[fault-server] still starting up...\n{"hello": 1}\n\n'
UNKNOWN_ID_RESPONSE: JSON = {"jsonrpc": "2.0", "id": 999999, "result": {}}
_BIG_MARKER = "\x00big-line\x00"
_BIG_MARKER_JSON = b"\\u0000big-line\\u0000"


def _sleep_forever() -> None:
    while True:
        time.sleep(3600)


def _is_modern(message: JSON) -> bool:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and META_PROTOCOL_VERSION in meta


def _is_response(message: JSON) -> bool:
    return "method" not in message and ("result" in message or "error" in message)


class FaultServer(DemoServer):
    """:class:`DemoServer` with the fault modes in ``faults`` switched on."""

    def __init__(
        self,
        faults: set[str],
        *,
        batch: int = 2,
        big_bytes: int = 50_000_000,
        big_count: int = 1,
        delay: float = 2.0,
        page_size: int | None = None,
        verbose: bool = False,
        cancel_log: str | None = None,
        flood: int = 20000,
    ) -> None:
        super().__init__(
            page_size=page_size,
            legacy="modern-only" not in faults,
            modern=not ({"legacy-only", "legacy-silent"} & faults),
            verbose=verbose,
        )
        self.faults = faults
        self.batch = max(1, batch)
        self.big_bytes = big_bytes
        self.big_left = big_count if big_count > 0 else -1  # -1: every echo call
        self.delay = delay
        self._fault_lock = threading.Lock()
        self._reorder_ids: set[Any] = set()  # tools/call ids whose responses get held
        self._held: list[JSON] = []
        self._big_ids: set[Any] = set()
        self.cancel_log = cancel_log
        self.flood = flood
        self._first_call = True  # late-answer, truncated, close-stdout: only the first tools/call
        self._truncate_ids: set[Any] = set()
        self._listen_ids: list[Any] = []  # list-changed-flood, modern: the open subscriptions/listen requests

    # Incoming messages ------------------------------------------------------------

    def handle(self, message: Any) -> None:
        """Apply the request-side faults, then let the demo server answer."""
        faults = self.faults
        if "hang-all" in faults:
            return
        if "garbage-only" in faults:
            self.write_raw(b"Starting server...\n\x1b]52;c;Y2xpcA==\x07 not JSON either\n")
            return
        if self.cancel_log and isinstance(message, dict) and message.get("method") == "notifications/cancelled":
            params = message.get("params")
            with open(self.cancel_log, "a", encoding="utf-8") as log:
                log.write(json.dumps(params.get("requestId") if isinstance(params, dict) else None) + "\n")
        is_request = isinstance(message, dict) and "method" in message and "id" in message
        method = message.get("method") if is_request else None
        if "legacy-silent" in faults and is_request and not self.initialized and method != "initialize":
            return
        if method == "subscriptions/listen" and "list-changed-flood" in faults:
            self._listen(message)
            return
        if method == "tools/call":
            self._before_tool_call(message)
            if "hang" in faults:
                return
            if "bad-answers" in faults and self._bad_answer(message):
                return
            first, self._first_call = self._first_call, False
            if first and "close-stdout" in faults:
                self._close_stdout()
                return
            if first and "late-answer" in faults:
                threading.Thread(target=self._answer_late, args=(message,), daemon=True).start()
                return
            if first and "truncated" in faults:
                with self._fault_lock:
                    self._truncate_ids.add(message.get("id"))
            self._flood(message)
        elif method in ("initialize", "server/discover") and "slow-init" in faults:
            time.sleep(self.delay)
        super().handle(message)
        if "no-stdin-read" in faults and (
            method == "initialize" or (method == "server/discover" and _is_modern(message))
        ):
            _sleep_forever()  # a legacy client's discover probe must not trigger this

    def _before_tool_call(self, message: JSON) -> None:
        faults = self.faults
        if "crash-on-call" in faults:
            sys.stderr.write("fatal: crashing on purpose\n")
            sys.stderr.flush()
            os._exit(3)
        if "stderr-flood" in faults:
            self._flood_stderr()
        params = message.get("params")
        request_id = message.get("id")
        if "out-of-order" in faults:
            with self._fault_lock:
                self._reorder_ids.add(request_id)
        if "big-line" in faults and self.big_left != 0 and isinstance(params, dict) and params.get("name") == "echo":
            if self.big_left > 0:
                self.big_left -= 1
            arguments = params.get("arguments")
            if isinstance(arguments, dict):
                arguments["message"] = _BIG_MARKER  # swapped for the huge text in send()
                with self._fault_lock:
                    self._big_ids.add(request_id)

    def _answer_late(self, message: JSON) -> None:
        time.sleep(self.delay)
        super().handle(message)  # a cancel meanwhile changes nothing: echo does not look

    def _close_stdout(self) -> None:
        """Close stdout for good (nothing more is written) and go on reading stdin."""
        with self._write_lock:
            self._broken = True
            with contextlib.suppress(OSError):
                os.close(self._out.fileno())

    def _listen(self, message: JSON) -> None:
        """subscriptions/listen (modern): acknowledge it; the stream stays open (no response) until cancelled."""
        params = message.get("params") or {}
        request_id = message.get("id")
        self._listen_ids.append(request_id)
        self.notify("notifications/subscriptions/acknowledged", {
            "notifications": params.get("notifications") or {}, "_meta": {META_SUBSCRIPTION_ID: request_id}})

    def _flood(self, message: JSON) -> None:
        """The flood modes: ``flood`` notifications before the answer to ``message`` (a tools/call)."""
        faults = self.faults
        if not faults.intersection(FLOODS):
            return
        params = message.get("params") or {}
        meta = params.get("_meta") if isinstance(params, dict) else None
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        notes: list[JSON] = []
        for n in range(1, self.flood + 1):
            if "progress-flood" in faults and token is not None:
                notes.append({"jsonrpc": "2.0", "method": "notifications/progress",
                              "params": {"progressToken": token, "progress": n, "total": self.flood}})
            if "log-flood" in faults:
                notes.append({"jsonrpc": "2.0", "method": "notifications/message",
                              "params": {"level": "info", "logger": "flood", "data": f"line {n} of {self.flood}"}})
            if "list-changed-flood" in faults:
                note: JSON = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
                if self._listen_ids:
                    note["params"] = {"_meta": {META_SUBSCRIPTION_ID: self._listen_ids[-1]}}
                notes.append(note)
        for start in range(0, len(notes), 1000):
            self.write_raw(b"".join(self.encode(note) for note in notes[start:start + 1000]))

    def _discover(self, ctx: Any) -> JSON:
        return self._with_list_changed(super()._discover(ctx))

    def _initialize(self, ctx: Any) -> JSON:
        return self._with_list_changed(super()._initialize(ctx))

    def _with_list_changed(self, result: JSON) -> JSON:
        if "list-changed-flood" in self.faults:
            capabilities = dict(result.get("capabilities") or {})
            capabilities["tools"] = {**(capabilities.get("tools") or {}), "listChanged": True}
            result = {**result, "capabilities": capabilities}
        return result

    def _bad_answer(self, message: JSON) -> bool:
        """Answer a tools/call named after a broken answer with that answer; False for other tools."""
        name = (message.get("params") or {}).get("name")
        rid = message.get("id")
        head = b'{"jsonrpc":"2.0","id":' + self.encode(rid).strip() + b","
        lines = {
            "null-result": head + b'"result":null}',
            "no-code": head + b'"error":{"message":"no code here"}}',
            "array-result": head + b'"result":[1,2]}',
            "bad-utf8": head + b'"result":{"content":[{"type":"text","text":"\xff\xfe"}]}}',
            "batch": b"[" + head + b'"result":{"content":[]}}]',
        }
        if name == "nested":
            self.write_raw(b"[" * 100_000 + b"]" * 100_000 + b"\n")
            return False
        line = lines.get(str(name))
        if line is None:
            return False
        self.write_raw(line + b"\n")
        return True

    @staticmethod
    def _flood_stderr() -> None:
        line = b"x" * 1023 + b"\n"
        stream = sys.stderr.buffer
        for index in range(18 * 1024):  # 18 MB of 1 KB lines
            stream.write(line)
            if index == 9 * 1024:  # one 2 MB line with no newline inside it
                stream.write(b"[" + b"y" * (2 * 1024 * 1024 - 3) + b"]\n")
        stream.flush()

    def on_eof(self) -> None:
        """Stay alive after stdin EOF when a mode says so; finish what is in flight first in finish-on-eof."""
        if {"ignore-sigterm", "ignore-stdin-eof"} & self.faults:
            _sleep_forever()
        if "finish-on-eof" in self.faults:
            deadline = time.monotonic() + 60.0
            while time.monotonic() < deadline:
                with self._state_lock:
                    if not self._calls:
                        return
                time.sleep(0.01)

    # Outgoing messages ------------------------------------------------------------

    def send(self, message: JSON) -> None:
        """Apply the response-side faults to every outgoing response."""
        if not _is_response(message):
            super().send(message)
            return
        request_id = message.get("id")
        with self._fault_lock:
            if request_id in self._truncate_ids:
                self._truncate_ids.discard(request_id)
                line = self.encode(message)
                self.write_raw(line[: len(line) // 2] + b"\n")
                return
            if request_id in self._big_ids:
                self._big_ids.discard(request_id)
                self.write_raw(self._with_faults(self._big_line(message)))
                return
            if request_id not in self._reorder_ids:
                release = [message]
            else:
                self._reorder_ids.discard(request_id)
                self._held.append(message)
                if len(self._held) < self.batch:
                    return
                release = self._held[::-1]
                self._held = []
        for item in release:
            self.write_raw(self._with_faults(self.encode(item)))

    def _big_line(self, message: JSON) -> bytes:
        """The response line, padded so that it is exactly ``big_bytes`` long before the newline."""
        line = self.encode(message)
        if _BIG_MARKER_JSON not in line:  # an error response: nothing to inflate
            return line
        padding = max(0, self.big_bytes - (len(line) - 1 - len(_BIG_MARKER_JSON)))
        head, _, tail = line.partition(_BIG_MARKER_JSON)
        return b"".join((head, b"x" * padding, tail))

    def _with_faults(self, line: bytes) -> bytes:
        parts = []
        if "garbage" in self.faults:
            parts.append(GARBAGE)
        if "unknown-id" in self.faults:
            parts.append(self.encode(UNKNOWN_ID_RESPONSE))
        parts.append(line)
        if "duplicate" in self.faults:
            parts.append(line)
        return b"".join(parts)


_GRANDCHILDREN: list[subprocess.Popen[bytes]] = []


def _spawn_grandchild(pidfile: str | None, stdio: str) -> None:
    devnull = subprocess.DEVNULL if stdio == "devnull" else None
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], stdin=devnull, stdout=devnull, stderr=devnull
    )
    _GRANDCHILDREN.append(child)  # keep a reference: no "still running" warning from Popen.__del__
    if pidfile:
        tmp = f"{pidfile}.tmp"
        Path(tmp).write_text(f"{child.pid}\n")
        os.replace(tmp, pidfile)  # readers never see a half-written file
    sys.stderr.write(f"fault-server: grandchild pid {child.pid}\n")
    sys.stderr.flush()


def _spawn_setsid_helper(pidfile: str | None) -> None:
    """A process in a session of its own holding our stdout and stderr (the server's group signals miss it)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stdin=subprocess.DEVNULL,
                             start_new_session=True)
    _GRANDCHILDREN.append(child)
    if pidfile:
        tmp = f"{pidfile}.tmp"
        Path(tmp).write_text(f"{child.pid}\n")
        os.replace(tmp, pidfile)


def main(argv: list[str] | None = None) -> int:
    """Parse the options, set up process-level faults and serve until EOF."""
    parser = build_arg_parser("fault_server.py")
    parser.add_argument("--fault", action="append", choices=MODES, default=[], metavar="MODE", help=", ".join(MODES))
    parser.add_argument("--batch", type=int, default=2, help="out-of-order: responses per reversed batch")
    parser.add_argument("--big-bytes", type=int, default=50_000_000, help="big-line: length of the line")
    parser.add_argument("--big-count", type=int, default=1, help="big-line: how many echo calls (0 = every)")
    parser.add_argument("--delay", type=float, default=2.0, help="slow-init: seconds to wait")
    parser.add_argument("--pidfile", default=None, help="grandchild: file to write its pid to")
    parser.add_argument("--grandchild-stdio", choices=("inherit", "devnull"), default="inherit")
    parser.add_argument("--cancel-log", default=None, help="finish-on-eof: file to append cancelled request ids to")
    parser.add_argument("--banner-lines", type=int, default=1, help="banner: how many lines that are not JSON")
    parser.add_argument("--flood", type=int, default=20000, help="the flood modes: notifications per tools/call")
    args = parser.parse_args(argv)
    faults = set(args.fault)

    if "exit-at-start" in faults:
        sys.stderr.write("error: missing API key DEMO_API_KEY\n")
        sys.stderr.flush()
        return 2
    if "ignore-sigterm" in faults:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    elif "ignore-stdin-eof" in faults:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if "grandchild" in faults:
        _spawn_grandchild(args.pidfile, args.grandchild_stdio)
    if "setsid-helper" in faults:
        _spawn_setsid_helper(args.pidfile)
    if "banner" in faults:
        sys.stdout.buffer.write(b"".join(b"fault-server %d: welcome!\n" % n for n in range(args.banner_lines)))
        sys.stdout.buffer.flush()

    server = FaultServer(
        faults,
        batch=args.batch,
        big_bytes=args.big_bytes,
        big_count=args.big_count,
        delay=args.delay,
        page_size=args.page_size,
        verbose=args.verbose,
        cancel_log=args.cancel_log,
        flood=args.flood,
    )
    try:
        code = server.serve()
    except KeyboardInterrupt:
        code = 130
    server.exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
