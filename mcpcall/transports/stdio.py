"""A server started as a subprocess, spoken to over its stdin and stdout.

Threads (each named ``mcpcall-<role>-<server>``):

- ``reader``: reads stdout, splits it into lines, decodes them, hands them to
  the dispatcher. Lines that are not JSON-RPC are skipped (a line that names a
  request id fails that request), logged, and named in the error of a request
  (or a connect) left unanswered while they came; a line longer than
  ``max_message_bytes`` is skipped without being held in memory and fails the
  request it answered.
- ``writer``: drains what callers could not write at once. Callers write
  straight into the (non-blocking) pipe while nothing is queued, so a server
  that stops reading stdin can never block a caller.
- ``stderr``: reads stderr lines into a ring buffer and passes each to logging
  (or to ``stderr=``), so a chatty server never fills its pipe and stalls.

The readers wait with ``poll()`` on their pipe, on a wake-up pipe that
``close()`` writes to, and (reader) on the process itself (a pidfd, or a check
every second where there is none). So a server that dies while a process it
started still holds its stdout is noticed at once, and ``close()`` never waits
on a pipe someone else keeps open. The pipes are read with ``os.read`` only:
no buffered file object, no lock a forked child could inherit held.

Closing follows a ladder: close stdin, wait, SIGTERM the process group, wait,
SIGKILL the group, reap. The process itself (starting it, its environment, its
group, its exit status, the ladder after stdin) is :mod:`.process`'s job.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import select
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any, Callable, Union

from .. import jsonrpc, pieces
from ..callbacks import log_exception
from ..errors import ConfigError, ConnectionClosed, ProtocolError
from ..forking import Owned, on_fork_in_child
from .base import DEFAULT_MAX_MESSAGE_BYTES, Receiver, Transport
from .process import default_environment, end_group, exit_code, forget_pipes, how_it_ended, pidfd, signal_group, spawn

__all__ = ["StdioTransport", "default_environment"]

log = logging.getLogger("mcpcall.stdio")

STDERR_TAIL_LINES = 40
_STDERR_LINE_LIMIT = 64 * 1024
_CHUNK = 1 << 16  # under malloc's mmap threshold: a larger read buffer costs an mmap and page faults per read
_PEEK = 4096
_EXIT_GRACE = 0.2  # after the server exits, how long stdout may stay quiet before it counts as closed
_EXIT_PEEK = 0.1  # a write found the pipe broken: how long to wait for the exit status that explains it
_MIN_BACKLOG = 1 << 20
_STDERR_AFTER_CLOSE = 1.0  # how long lines still queued for a stderr consumer are passed on after close()
_STDERR_BACKLOG = 1000  # stderr lines waiting for the callbacks thread; more are not shown (the tail keeps them)
_PROBE_KEPT = 2  # stderr lines kept from each end of the window of a failed modern probe
_PROBE_NOISY = 10  # more lines than this in that window are condensed
_PROBE_GRACE = 0.5  # stderr still in the pipe when the handshake ended counts as the probe's
_BATCHES_ALLOWED = ("2025-03-26",)  # the one revision that allowed JSON-RPC batches
_POLL_IN = select.POLLIN | select.POLLHUP | select.POLLERR
_PARK_IDLE = 0.05  # the reader resumes reading once no caller has read for itself for this long
_LEAD_SLICE = 0.01  # a caller reading for itself looks this often whether its Future was finished by others

StderrOption = Union[None, str, Callable[[str], None], IO[str]]


class StdioTransport(Transport):
    """Runs ``argv`` as a subprocess and exchanges newline-delimited JSON-RPC with it."""

    logger_name = "mcpcall.stdio"
    uses_caller_waits = False  # a caller reads its answer itself through read_for(), not through caller_waits

    def __init__(
        self,
        argv: Sequence[str],
        *,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = False,
        cwd: str | None = None,
        stderr: StderrOption = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        close_timeout: float = 2.0,
    ) -> None:
        if not argv or not all(isinstance(a, str) for a in argv):
            raise ConfigError(f"a stdio server needs a non-empty list of string arguments, not {argv!r}")
        self.argv = list(argv)
        self.name = name or os.path.basename(self.argv[0])
        self._env_extra = dict(env or {})
        self._inherit_env = inherit_env
        self._cwd = cwd
        self._stderr_option = stderr
        self.max_message_bytes = max_message_bytes
        self.close_timeout = close_timeout
        # The last lines of stderr, with the time each arrived (for the probe's noise, see quiet_since).
        self._tail: collections.deque[tuple[float, str]] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._tail_lock = threading.Lock()
        self._quiet: tuple[float, float] | None = None  # the window of a rejected probe's noise
        self._stderr_queued = 0  # lines handed to the callbacks thread (counted by the drain)
        self._stderr_shown = 0  # ... and shown there (counted by the callbacks thread)
        self._stderr_dropped = 0
        self._closed_at = 0.0  # monotonic time close() began
        self.process: subprocess.Popen[bytes] | None = None
        self._owner = Owned()
        self._receiver: Receiver | None = None
        self._version: str | None = None
        self._stdin_fd = -1
        self._wake_r = self._wake_w = -1
        self._pidfd = -1
        # Writing: callers put encoded messages in the inbox; whoever gets the write
        # lock writes everything there (callers never wait for each other) and re-checks
        # the inbox after letting go. What the pipe would not take waits in ``_out``
        # for the writer thread, which ``_wake`` rouses.
        self._inbox: collections.deque[bytes] = collections.deque()
        self._out: collections.deque[memoryview] = collections.deque()
        self._pending_bytes = 0  # accepted by send() and not yet in the pipe (under _count_lock)
        self._count_lock = threading.Lock()
        #: The most that waits for a server that does not read its stdin (one larger message still goes).
        self._backlog_limit = max(max_message_bytes, _MIN_BACKLOG)
        self._write_lock = threading.Lock()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._closing = False
        self._closed = False
        self._close_lock = threading.Lock()
        self._gone: ConnectionClosed | None = None
        # Lines of stdout that were no JSON-RPC message (a banner, logs, another program's output):
        # how many, the first and the latest (escaped excerpts), and whether the server ever spoke JSON-RPC.
        self._skipped = 0
        self._skipped_first = ""
        self._skipped_last = ""
        self._spoke = False
        self._stderr_logger = logging.getLogger(f"mcpcall.server.{self.name}")
        # A caller that is the only one waiting reads its answer itself (read_for), while the reader is parked
        # between lines; all under _park_cond. _leader: the thread reading for itself; _handover: what it read
        # and leaves to the reader (a piece of a line, EOF); _resume: the reader must read again at once.
        self._park_lock = threading.Lock()  # taken as it is where nothing waits (cheaper than the Condition's methods)
        self._park_cond = threading.Condition(self._park_lock)
        self._parked = False
        self._want_lead = False
        self._lead_asker: Any = None  # the Future of the lone call that set _want_lead: no park before its answer
        self._resume = False
        self._no_lead = False
        self._leader: int | None = None
        self._last_lead = 0.0
        self._crowded_at = -_PARK_IDLE  # when a waiter last asked a parked reader to read (see read_for)
        self._handover: bytes | None = None
        self._lead_poller: Any = None

    def __repr__(self) -> str:
        pid = self.process.pid if self.process else None
        # The environment is deliberately not shown: it may hold secrets.
        return f"<StdioTransport {self.name!r} argv={self.argv[:1]!r}… pid={pid}>"

    # -- starting ----------------------------------------------------------------

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ) if self._inherit_env else default_environment()
        env.update(self._env_extra)
        return env

    def start(self, receiver: Receiver, *, timeout: float | None = None) -> None:
        self._receiver = receiver
        stderr_target: Any = subprocess.PIPE
        if self._stderr_option == "inherit":
            stderr_target = None
        elif self._stderr_option == "devnull":
            stderr_target = subprocess.DEVNULL
        environment = self._environment()
        # All of the setup under the close lock: a close() from another thread either comes first
        # (nothing starts) or finds the process, its pipes and its threads all there to end.
        with self._close_lock:
            if self._closed:
                raise ConnectionClosed(f"server {self.name!r} was closed before it started")
            self.process = spawn(self.argv, name=self.name, environment=environment, cwd=self._cwd, stderr=stderr_target)
            proc = self.process
            try:
                self._set_up(proc)
            except Exception as exc:  # out of descriptors or threads: the process must not outlive the failure
                signal_group(proc.pid, signal.SIGKILL, self.name)
                raise ConnectionClosed(f"could not start server {self.name!r}: {type(exc).__name__}: {exc}") from exc

    def _set_up(self, proc: subprocess.Popen[bytes]) -> None:
        """Pipes, descriptors and threads of a process just started; close lock held."""
        assert proc.stdin is not None and proc.stdout is not None
        self._stdin_fd = proc.stdin.fileno()
        os.set_blocking(self._stdin_fd, False)
        self._wake_r, self._wake_w = os.pipe()
        self._pidfd = pidfd(proc.pid)
        on_fork_in_child(self, self._forget_inherited)
        # The stderr drain first: the reader joins it when stdout ends, which can be at once.
        if proc.stderr is not None:
            self._spawn(self._stderr_loop, "stderr")
        self._spawn(self._write_loop, "writer")
        self._spawn(self._read_loop, "reader")

    def _spawn(self, target: Callable[[], None], role: str) -> None:
        thread = threading.Thread(target=target, name=f"mcpcall-{role}-{self.name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def negotiated(self, era: str, version: str) -> None:
        self._version = version

    # -- writing -----------------------------------------------------------------

    def send(self, message: dict[str, Any], *, timeout: float | None = None) -> None:
        data = jsonrpc.encode_line(message)
        if self._gone is not None:
            raise self._gone
        if self._closing:
            raise ConnectionClosed(f"client for server {self.name!r} is closed")
        inbox = self._inbox
        if not inbox and not self._out and self._write_lock.acquire(False):
            # Nothing queued: write it now, counting only what the pipe did not take (no count lock, no queue).
            try:
                if not self._out and self._stdin_fd >= 0:
                    self._write_now(data)
                    return
            finally:
                self._write_lock.release()
                if inbox:  # queued by another sender while we held the lock: theirs to send, and nobody else's
                    self._flush_inbox()
        with self._count_lock:
            pending = self._pending_bytes
            if pending and pending + len(data) > self._backlog_limit:
                # A server that stopped reading stdin: what waits for it is bounded, as every buffer is.
                raise ConnectionClosed(
                    f"server {self.name!r} is not reading its stdin: {pending} bytes are waiting to be written; "
                    "nothing more is queued until it reads"
                )
            self._pending_bytes = pending + len(data)
        self._inbox.append(data)
        self._flush_inbox()

    def _flush_inbox(self) -> None:
        inbox = self._inbox
        lock = self._write_lock
        while inbox and lock.acquire(False):
            try:
                count = len(inbox)
                data = inbox.popleft() if count == 1 else b"".join([inbox.popleft() for _ in range(count)])
                if self._out or self._stdin_fd < 0:
                    self._out.append(memoryview(data))
                    self._wake.set()
                    continue
                try:
                    written = os.write(self._stdin_fd, data)
                except BlockingIOError:
                    written = 0
                except OSError as exc:
                    self._gone = self._broken_pipe(exc)
                    raise self._gone from exc
                with self._count_lock:  # as _written does (inline: this is every message's path)
                    self._pending_bytes -= written
                if written < len(data):
                    self._out.append(memoryview(data)[written:])
                    self._wake.set()
            finally:
                lock.release()

    def _write_now(self, data: bytes) -> None:
        """Write ``data`` with ``_write_lock`` held and nothing queued; the writer thread gets what the pipe left."""
        try:
            written = os.write(self._stdin_fd, data)
        except BlockingIOError:
            written = 0
        except OSError as exc:
            self._gone = self._broken_pipe(exc)
            raise self._gone from exc
        if written < len(data):
            with self._count_lock:
                self._pending_bytes += len(data) - written
            self._out.append(memoryview(data)[written:])
            self._wake.set()

    def _written(self, count: int) -> None:
        with self._count_lock:
            self._pending_bytes -= count

    def _broken_pipe(self, exc: OSError) -> ConnectionClosed:
        # Most often the server has exited: say so (with its last words) rather than "broken pipe".
        # Waiting a moment for its status is for a caller; one of our threads (the scheduler sends
        # cancel notices) never waits.
        internal = threading.current_thread().name.startswith("mcpcall-")
        returncode = self._exit_code(0.0 if internal else _EXIT_PEEK)
        if returncode is not None:
            return ConnectionClosed(
                f"server {self.name!r} {how_it_ended(returncode)} (unexpectedly)",
                returncode=returncode,
                stderr_tail=self.tail(),
            )
        return ConnectionClosed(f"server {self.name!r} stopped reading its stdin ({exc.strerror or exc})")

    def _write_loop(self) -> None:
        """Drain ``_out`` while the pipe is full; sleep otherwise."""
        out = self._out
        while True:
            self._wake.wait()
            blocked = False
            with self._write_lock:
                fd = self._stdin_fd
                while True:
                    if not out or fd < 0:
                        self._wake.clear()
                        if self._closing or fd < 0:
                            return
                        break
                    chunk = out[0]
                    try:
                        written = os.write(fd, chunk)
                    except BlockingIOError:
                        written = 0
                    except OSError as exc:
                        self._gone = self._broken_pipe(exc)
                        out.clear()
                        return
                    self._written(written)
                    if written == len(chunk):
                        out.popleft()
                        continue
                    out[0] = chunk[written:]
                    blocked = True
                    break
            self._flush_inbox()  # callers may have queued while we held the lock
            if blocked:
                # The pipe is full: wait (without the lock) until the server reads, or close wakes us.
                poller = select.poll()
                poller.register(fd, select.POLLOUT)
                poller.register(self._wake_r, select.POLLIN)
                try:
                    poller.poll(200)
                except OSError:
                    return

    # -- reading -----------------------------------------------------------------

    # A blocking call whose caller is the only one waiting reads its answer on the caller's own thread:
    # no wake-up of the reader and then of the caller, which costs more than everything else a call does.
    # The reader thread parks between lines while callers do so (it reads again once none has for
    # _PARK_IDLE, or at once when another waiter needs it, on close, or when the server exits); a caller
    # reads only whole lines, and leaves anything else (a piece of a line, EOF, a line over the limit) to
    # the reader, unread by it, through _handover. So the line assembly stays the reader's alone.

    def _poll(self, poller: Any, timeout: float, *, idle: bool, fd: int) -> list[tuple[int, int]]:
        """The reader's poll; between lines, while callers read for themselves, it parks here first."""
        if idle and self._want_lead and self._handover is None and not self._closing:
            asker = self._lead_asker
            # Not while the call that asked is still to be answered: a line before its answer (a log message,
            # progress) would have the reader park with that answer unread until the park timed out.
            if asker is None or asker.done():
                self._park()
        if self._handover is not None:
            return [(fd, select.POLLIN)]  # _read_chunk hands it on
        events: list[tuple[int, int]] = poller.poll(timeout)
        return events

    def _read_chunk(self, fd: int, size: int) -> bytes:
        """The next bytes of stdout for the reader: what a caller reading for itself left to it, else a read."""
        handover = self._handover
        if handover is not None:
            self._handover = None
            return handover
        return os.read(fd, size)

    def _park(self) -> None:
        """On the reader: wait while callers read for themselves; never while one of them still reads."""
        cond = self._park_cond
        with cond:
            self._want_lead = False
            self._lead_asker = None
            self._parked = True
            self._last_lead = time.monotonic()  # a caller asked just now: it gets _PARK_IDLE to come back
            try:
                while not (self._closing or self._resume or self._no_lead):
                    if self._leader is None and time.monotonic() - self._last_lead >= _PARK_IDLE:
                        break
                    cond.wait(_PARK_IDLE)
                while self._leader is not None:  # it leaves once its Future is done, on close, or on the server's exit
                    cond.wait(_LEAD_SLICE)
            finally:
                self._parked = False
                self._resume = False

    def reading(self) -> None:
        # Once asked (_resume), the parked reader leaves as soon as it runs: later waiters need not ask again.
        if self._parked and not self._resume:
            with self._park_lock:
                if self._parked and not self._resume:
                    self._resume = True
                    self._crowded_at = time.monotonic()  # another waiter came: read_for asks for no lead for a while
                    self._park_cond.notify_all()
        elif self._want_lead:
            # Not parked yet, but a lone caller asked it to park after the line it reads now: not with this
            # waiter's answer to come (it would wait until the park ends, _PARK_IDLE at most).
            self._want_lead = False
            self._lead_asker = None  # (nor keep its result alive)

    def read_for(self, future: Any, deadline: float) -> bool:
        lock = self._park_lock
        me = threading.get_ident()
        resume = True
        try:
            with lock:
                if not self._parked or self._leader is not None or self._handover is not None or self._closing \
                        or self._no_lead or self._gone is not None:
                    if self._parked:  # behind another caller reading for itself: the reader reads for this one
                        self._resume = True
                        self._park_cond.notify_all()
                    elif time.monotonic() - self._crowded_at >= _PARK_IDLE:
                        # The reader parks after the line it reads now, for the next call; not while other
                        # waiters came and went within _PARK_IDLE (several threads calling: each park would
                        # only hold up their answers until one of them asks the reader back).
                        self._lead_asker = future
                        self._want_lead = True
                    return False
                self._leader = me
            resume = self._lead(future, deadline)
        finally:
            # Whatever ended it, a Ctrl-C too (even one that lands as the lead is taken): the reader never
            # stays parked behind a caller that left.
            if self._leader == me:
                with lock:
                    self._leader = None
                    self._last_lead = time.monotonic()
                    if resume or self._resume or self._handover is not None or self._closing:
                        # (_resume: another waiter asked for the reader meanwhile; it waits only for this leader.)
                        self._resume = True
                        self._park_cond.notify_all()
        return True

    def _lead(self, future: Any, deadline: float) -> bool:
        """Read whole lines on the caller's thread until ``future`` is done; True if the reader must read again now."""
        receiver = self._receiver
        proc = self.process
        if receiver is None or proc is None or proc.stdout is None:
            return True
        fd = proc.stdout.fileno()
        poller = self._lead_poller
        if poller is None:
            poller = self._lead_poller = select.poll()
            poller.register(fd, _POLL_IN)
            poller.register(self._wake_r, select.POLLIN)
            if self._pidfd >= 0:
                poller.register(self._pidfd, select.POLLIN)
        limit = self.max_message_bytes
        while future._state == "PENDING":  # done(), without its lock: a stale read costs one more slice
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                events = poller.poll(min(left, _LEAD_SLICE) * 1000)
            except OSError:
                return True
            if not events:
                continue
            for ready, _ in events:
                if ready != fd:  # closing, or the server exited: the reader's to see
                    if ready == self._pidfd:
                        self._no_lead = True
                    return True
            try:
                chunk = os.read(fd, _CHUNK)
            except OSError:
                return True  # the reader reads again and reports it
            if not chunk or chunk[-1:] != b"\n" or len(chunk) > limit:
                self._handover = chunk  # a piece of a line, EOF, or more than a line may be: the reader's
                return True
            lines = chunk.split(b"\n")
            lines.pop()  # empty: the chunk ends with a newline
            # Only the caller's own answer is handled here; from the first other line on, the rest is the
            # reader's. This thread may be the main one, where a Ctrl-C lands between any two steps: handling
            # another waiter's answer, a notification or a server request half-way would lose it (its Future
            # never finished), while a half-handled answer of this call ends with the call (it is cancelled).
            own = getattr(future, "request_id", None)
            done = 0
            handling = False
            try:
                for text in lines:
                    if not text or text.isspace():
                        done += 1
                        continue
                    try:
                        message = jsonrpc.decode(text)
                    except ProtocolError:
                        message = None
                    if message.__class__ is not dict or message.get("id") != own or "method" in message:
                        self._handover = b"\n".join(lines[done:]) + b"\n"
                        return True
                    handling = True
                    self._message(message, text, receiver)  # handles whatever it holds; only an interrupt escapes
                    handling = False
                    done += 1
            except BaseException:
                rest = lines[done + 1:] if handling else lines[done:]  # an interrupted decode changed nothing
                if rest:
                    self._handover = b"\n".join(rest) + b"\n"
                raise
        return False

    def _warn(self, kind: str, text: str) -> None:
        """A warning about what the server sent: the receiver logs it off this thread, a few per kind."""
        receiver = self._receiver
        if receiver is not None:
            receiver.on_warning(text, kind=kind)
        else:
            self._log(logging.DEBUG, "%s", text)

    def _read_loop(self) -> None:
        proc = self.process
        receiver = self._receiver
        assert proc is not None and proc.stdout is not None and receiver is not None
        fd = proc.stdout.fileno()
        poller = select.poll()
        poller.register(fd, _POLL_IN)
        poller.register(self._wake_r, select.POLLIN)
        if self._pidfd >= 0:
            poller.register(self._pidfd, select.POLLIN)
        limit = self.max_message_bytes
        # The start of a line not yet ended, as the reads it came in (past a MiB, in blocks mapped on their own):
        # decoding lets each go once its text is taken (pieces.decode_parts), so a 10 MB line is held about once.
        partial = pieces.Pieces()
        skipping = False  # inside a line over the limit
        skip_head = b""
        skip_size = 0
        exited = False
        ended = ""
        read = self._read_chunk
        while True:
            try:
                events = self._poll(poller, _EXIT_GRACE * 1000 if exited else (-1 if self._pidfd >= 0 else 1000),
                                    idle=not partial and not skipping and not exited, fd=fd)
            except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for old kernels
                continue
            except OSError as exc:
                ended = f"reading its stdout failed ({exc})"
                break
            readable = False
            for ready, _ in events:
                if ready == fd:
                    readable = True
                elif ready == self._wake_r:
                    ended = "closing"
                elif ready == self._pidfd:
                    exited = True
                    poller.unregister(self._pidfd)
            if ended:
                break
            if not readable:
                if exited:
                    ended = "exited while a process it started still holds its stdout"
                    break
                if self._pidfd < 0 and self._exit_code(0.0) is not None:
                    exited = True
                continue
            try:
                chunk = read(fd, _CHUNK)
            except OSError as exc:
                ended = f"reading its stdout failed ({exc})"
                break
            if not chunk:
                break  # EOF
            start = 0
            size = len(chunk)
            while start < size:
                newline = chunk.find(b"\n", start)
                end = size if newline < 0 else newline
                if skipping:
                    skip_size += end - start
                    if newline >= 0:
                        self._oversize(skip_head, skip_size)
                        skipping = False
                elif newline < 0:
                    partial.append(chunk[start:] if start else chunk)
                    if partial.size > limit:
                        skipping, skip_head, skip_size = True, partial.head(_PEEK), partial.size
                        partial.clear()
                elif partial:
                    partial.append(chunk[start:newline])
                    if partial.size > limit:
                        self._oversize(partial.head(_PEEK), partial.size)
                        partial.clear()
                    else:
                        self._line(partial, receiver)  # empties it
                elif newline - start > limit:
                    self._oversize(chunk[start : start + _PEEK], newline - start)
                else:
                    self._line(chunk[start:newline], receiver)
                start = end + 1
        self._on_stdout_closed(ended)

    def _line(self, line: bytes | pieces.Pieces, receiver: Receiver) -> None:
        """One line from stdout; nothing it holds may end the read loop.

        :class:`pieces.Pieces` (a line that came in pieces) are emptied: each piece
        goes as soon as its text is taken (:func:`pieces.decode_parts`).
        """
        if isinstance(line, bytes):
            head = line
            if not line or line.isspace():
                return
        else:
            head = line.head(_PEEK)  # what messages quote; the id
            if not head.strip() and line.isspace():
                line.clear()
                return
        try:
            message = jsonrpc.decode(line) if isinstance(line, bytes) else pieces.decode_parts(line.take())
        except ProtocolError as exc:
            request_id = jsonrpc.peek_id(head[:_PEEK])
            if request_id is not None:
                receiver.on_bad_message(
                    ProtocolError(f"server {self.name!r} answered with a line that is not valid JSON: {exc}"), request_id
                )
            else:
                self._skip(head, "is not JSON")
            return
        self._message(message, head, receiver)

    def _message(self, message: Any, head: bytes, receiver: Receiver) -> None:
        """A decoded line from stdout (``head``: its first bytes, for what messages quote); nothing may end the read loop."""
        try:
            if message.__class__ is dict or isinstance(message, dict):
                if message.get("jsonrpc") == "2.0":
                    self._spoke = True
                else:
                    self._skip(head, "is JSON but no JSON-RPC message")
                receiver.on_message(message)  # the dispatcher ignores what is not JSON-RPC 2.0 (and says so)
            elif isinstance(message, list) and message:
                self._spoke = True
                self._batch(message, receiver)
            else:
                self._skip(head, "is JSON but no JSON-RPC message")
        except Exception as exc:  # noqa: BLE001 - a message we failed to handle must not end the connection
            request_id = message.get("id") if isinstance(message, dict) else None
            error = ProtocolError(f"server {self.name!r}: could not handle a message ({type(exc).__name__}: {exc})")
            if jsonrpc.is_valid_id(request_id):
                receiver.on_bad_message(error, request_id)
            else:
                self._log(logging.DEBUG, "%s", str(error))

    def _skip(self, line: bytes, why: str) -> None:
        """A line of stdout that is no message: counted and kept (an excerpt) for the errors it may explain."""
        text = _excerpt(line)
        self._skipped += 1
        self._skipped_last = text
        if self._skipped == 1:
            self._skipped_first = text
        advice = "" if self._spoke or self._skipped > 1 else (
            " (a stdio server writes only JSON-RPC messages to stdout, its logs go to stderr; if no answer comes, "
            "check that the command starts an MCP server speaking over stdio)"
        )
        self._warn("garbage", f"server {self.name!r} wrote a line to stdout that {why}; skipped: {text}{advice}")

    def skipped(self) -> int:
        return self._skipped

    def skipped_note(self, since: int = 0, request_id: Any = None) -> str | None:
        count = self._skipped - since
        if count <= 0:
            return None
        if count == 1:
            text = f"the server wrote 1 line to stdout that is not JSON-RPC: {self._skipped_last}"
        else:
            which = "first" if since == 0 else "last"
            line = self._skipped_first if since == 0 else self._skipped_last
            text = f"the server wrote {count} lines to stdout that are not JSON-RPC, the {which}: {line}"
        if not self._spoke:
            text += " (it has not written one JSON-RPC message"
            if _URL.search(self._skipped_first):
                text += "; if it serves MCP over HTTP, connect to its URL instead"
            text += ")"
        return text

    def _batch(self, items: list[Any], receiver: Receiver) -> None:
        """A JSON-RPC batch: allowed in 2025-03-26 only; otherwise it fails the requests it answers."""
        if self._version in _BATCHES_ALLOWED:
            for item in items:
                if isinstance(item, dict):
                    receiver.on_message(item)
            return
        error = ProtocolError(
            f"server {self.name!r} answered with a JSON-RPC batch, which protocol version "
            f"{self._version or '(none yet)'} does not allow"
        )
        named = False
        for item in items:
            request_id = item.get("id") if isinstance(item, dict) and "method" not in item else None
            if jsonrpc.is_valid_id(request_id):
                named = True
                receiver.on_bad_message(error, request_id)
        if not named:
            self._warn("batch", f"{error}; skipped")

    def _oversize(self, head: bytes, size: int) -> None:
        assert self._receiver is not None
        self._receiver.on_bad_message(
            ProtocolError(
                f"server {self.name!r} sent a message of {size} bytes or more, over the limit of "
                f"{self.max_message_bytes} bytes (raise max_message_bytes= if it is legitimate); it was skipped"
            ),
            jsonrpc.peek_id(head),
        )

    def _on_stdout_closed(self, ended: str) -> None:
        receiver = self._receiver
        closing = self._closing or ended == "closing"
        returncode = self._exit_code(wait=0.0 if closing else 1.0)
        if not closing and returncode is not None:
            # Let the stderr drain catch the last words before reporting them (a process that lives on keeps
            # its stderr open: the drain would not end, and the error would only come later).
            for thread in list(self._threads):
                if thread.name.startswith("mcpcall-stderr-") and thread.ident is not None:
                    thread.join(1.0)
        if ended and not closing:
            what = ended if returncode is None else f"{how_it_ended(returncode)} ({ended})"
        elif returncode is None:
            what = "closed its stdout"
        else:
            what = how_it_ended(returncode)
        reason = "the client was closed" if closing else "unexpectedly"
        note = None if closing or self._spoke else self.skipped_note()
        exc = ConnectionClosed(
            f"server {self.name!r} {what} ({reason})" + (f"; {note}" if note else ""),
            returncode=returncode,
            stderr_tail=self.tail(),
        )
        if self._gone is None:
            self._gone = exc
        self._wake.set()
        # Not logged: the pending requests (or the next one) carry it, with the stderr tail.
        self._log(logging.DEBUG, "%s", exc.reason)
        if receiver is not None:
            receiver.on_close(exc)

    def _exit_code(self, wait: float) -> int | None:
        """The exit status without reaping (so the process group stays ours until close)."""
        return exit_code(self.process, wait)

    @property
    def stderr_tail(self) -> list[str]:
        """The last lines the server wrote to stderr (at most :data:`STDERR_TAIL_LINES`)."""
        return self.tail()

    def tail(self) -> list[str]:
        """The last lines of stderr, oldest first (a rejected probe's noise condensed)."""
        with self._tail_lock:
            items = list(self._tail)
            window = self._quiet
        if window is not None:
            start, end = window
            during = [item for item in items if start <= item[0] <= end]
            if len(during) > _PROBE_NOISY:  # a few lines are what a server says at start, not noise
                hidden = len(during) - 2 * _PROBE_KEPT
                note = (start, f"… ({hidden} lines written while mcpcall probed for the modern protocol)")
                before = [item for item in items if item[0] < start]
                after = [item for item in items if item[0] > end]
                items = before + during[:_PROBE_KEPT] + [note] + during[-_PROBE_KEPT:] + after
        return [text for _, text in items]

    def quiet_since(self, started: float) -> None:
        """The lines written from ``started`` (monotonic) until now, and a moment more, are probe noise.

        The client calls this after a modern probe the server rejected: some
        legacy servers log dozens of lines about it, which would bury a later
        crash's own last words in the error that reports it. Such a window
        shows in :meth:`tail` as its first and last lines and a count; the
        moment more is for lines still in the pipe when the handshake ended.
        """
        with self._tail_lock:
            self._quiet = (started, time.monotonic() + _PROBE_GRACE)

    def _stderr_sink(self) -> Callable[[str], None] | None:
        """What each stderr line goes to, on the callbacks thread (None: only the tail)."""
        option = self._stderr_option
        if callable(option):
            return option
        if option is not None and hasattr(option, "write"):
            target = option

            def write(text: str) -> None:
                target.write(text + "\n")
                flush = getattr(target, "flush", None)
                if flush is not None:
                    flush()

            return write
        if option is None or option == "log":
            logger = self._stderr_logger
            if logger.isEnabledFor(logging.INFO):
                return lambda text: logger.info("%s", text)
        return None

    def _show_stderr(self, sink: Callable[[str], None], lines: list[str]) -> None:
        """On the callbacks thread: pass lines on (user code: a logging handler, a callback).

        Once the backlog is gone, lines skipped meanwhile are reported in one line of their own.
        """
        try:
            for text in lines:
                closed_at = self._closed_at
                if closed_at and time.monotonic() - closed_at > _STDERR_AFTER_CLOSE:
                    return  # closing: a slow consumer does not hold the client's close() for long
                try:
                    sink(text)
                except Exception:  # noqa: BLE001 - one failing line does not hide the next
                    log_exception(log, logging.DEBUG, "stderr callback for server %r failed", self.name)
        finally:
            self._stderr_shown += len(lines)
        if self._stderr_queued == self._stderr_shown:
            with self._tail_lock:
                dropped, self._stderr_dropped = self._stderr_dropped, 0
            if dropped:
                try:
                    sink(f"(mcpcall: {dropped} lines of stderr not shown here: the consumer fell behind)")
                except Exception:  # noqa: BLE001 - as for any line
                    log_exception(log, logging.DEBUG, "stderr callback for server %r failed", self.name)

    def _pass_on(self, lines: list[str]) -> None:
        """From the drain: hand lines to the callbacks thread, never more than a bounded backlog."""
        sink = self._stderr_sink()
        receiver = self._receiver
        if sink is None or receiver is None:
            return
        backlog = self._stderr_queued - self._stderr_shown
        if backlog >= _STDERR_BACKLOG:
            with self._tail_lock:
                self._stderr_dropped += len(lines)  # the server never waits for a slow sink
            return
        self._stderr_queued += len(lines)
        if not receiver.defer(self._show_stderr, sink, lines):
            self._stderr_shown += len(lines)

    def _stderr_loop(self) -> None:
        """The drain: read stderr into the tail and hand it on; never runs user code, never waits on it."""
        proc = self.process
        assert proc is not None and proc.stderr is not None
        fd = proc.stderr.fileno()
        tail, tail_lock = self._tail, self._tail_lock
        poller = select.poll()
        poller.register(fd, _POLL_IN)
        poller.register(self._wake_r, select.POLLIN)
        partial = b""
        while True:
            try:
                events = poller.poll()
            except OSError:
                return
            if any(ready == self._wake_r for ready, _ in events):
                return
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return
            if not chunk:
                lines = [partial] if partial else []
            else:
                data = partial + chunk
                lines = data.split(b"\n")
                partial = lines.pop()
                if len(partial) > _STDERR_LINE_LIMIT:  # an endless line: show it in pieces
                    lines.append(partial)
                    partial = b""
            texts = [raw.decode("utf-8", "replace").rstrip("\r") for raw in lines]
            if texts:
                now = time.monotonic()
                with tail_lock:
                    tail.extend((now, text if len(text) <= 1000 else text[:1000] + "…") for text in texts)
                self._pass_on(texts)
            if not chunk:
                return

    # -- closing -----------------------------------------------------------------

    @property
    def returncode(self) -> int | None:
        """The exit code once the process has ended, else ``None``."""
        return self._exit_code(0.0)

    def _forget_inherited(self) -> None:
        """In a forked child: drop our copies of the parent's pipes; touch nothing else."""
        self._closed = self._closing = True
        self._stdin_fd = -1
        # The park lock may have been held by one of the parent's threads at the fork (held for ever here):
        # a wait on an inherited Future asks reading(), which must not take it.
        self._parked = False
        self._park_lock = threading.Lock()
        self._park_cond = threading.Condition(self._park_lock)
        forget_pipes(self.process)
        for fd in (self._wake_r, self._wake_w, self._pidfd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._wake_r = self._wake_w = self._pidfd = -1

    def terminate(self) -> None:
        """Close without waiting for the server to leave on its own: SIGTERM at once (a failed connect)."""
        self._close(graceful=False)

    def close(self) -> None:
        self._close(graceful=True)

    def _close(self, *, graceful: bool) -> None:
        if self._owner.forked:
            return  # the server is the parent's; _forget_inherited already let go of the pipes
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        proc = self.process
        self._closing = True
        self._wake.set()
        self.reading()  # a parked reader reads again (and sees the end)
        if proc is None:
            return
        if graceful:
            self._flush_writer(0.5)
        with self._write_lock:
            # Under the lock, so the writer never writes to a closed (or reused) fd.
            self._out.clear()
            self._inbox.clear()
            self._stdin_fd = -1
            try:
                assert proc.stdin is not None
                proc.stdin.close()
            except OSError:
                pass
        end_group(proc, self.name, self.close_timeout, graceful=graceful)
        # From here a slow stderr consumer gets a little more time, not more: the server's last words
        # (written while it shut down) are passed on first.
        self._closed_at = time.monotonic()
        # Wake the readers: a process outside the group (setsid) may still hold stdout or stderr.
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
        stuck = False
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(2.0)
                if thread.is_alive():  # pragma: no cover - they run no user code and wake on the pipe
                    stuck = True
                    log.warning("thread %s of server %r did not stop", thread.name, self.name)
        if stuck:  # pragma: no cover
            # A thread still polls these: closing them could hand their numbers to someone else's file.
            return
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                try:
                    stream.close()  # never read through: its lock is free
                except OSError:
                    pass
        for fd in (self._wake_r, self._wake_w, self._pidfd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._wake_r = self._wake_w = self._pidfd = -1

    def _flush_writer(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._write_lock:
                if not self._out or self._gone is not None:
                    return
            time.sleep(0.01)


_EXCERPT = 120  # characters of a skipped line shown in messages
_URL = re.compile(r"\bhttps?://")


def _excerpt(line: bytes) -> str:
    """The start of a line the server wrote, quoted, with control characters escaped (never a terminal's command)."""
    text = line[: _EXCERPT * 4].decode("utf-8", "replace").rstrip("\r")
    cut = len(text) > _EXCERPT or len(line) > _EXCERPT * 4
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:_EXCERPT])
    return f"'{shown}'" + ("…" if cut else "")
