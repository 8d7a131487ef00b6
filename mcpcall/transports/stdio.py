"""A server started as a subprocess, spoken to over its stdin and stdout.

Threads (each named ``mcpcall-<role>-<server>``):

- ``reader``: reads stdout a line at a time, decodes it, hands it to the
  dispatcher. Lines that are not JSON are logged and skipped; a line longer
  than ``max_message_bytes`` is skipped without being held in memory and fails
  the request it answered.
- ``writer``: drains what callers could not write at once. Callers write
  straight into the (non-blocking) pipe while nothing is queued, so a server
  that stops reading stdin can never block a caller.
- ``stderr``: reads stderr lines into a ring buffer and passes each to logging
  (or to ``stderr=``), so a chatty server never fills its pipe and stalls.

Closing follows a ladder: close stdin, wait, SIGTERM the process group, wait,
SIGKILL the group, reap. The server runs in a new session, so the group holds
what it spawned too (``npx``/``uvx`` children).
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any, Callable, Union

from .. import jsonrpc
from ..errors import ConfigError, ConnectionClosed, ProtocolError
from .base import Receiver, Transport

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "StdioTransport", "default_environment"]

log = logging.getLogger("mcpcall.stdio")

DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
STDERR_TAIL_LINES = 40
_STDERR_LINE_LIMIT = 64 * 1024
_CHUNK = 1 << 20

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    _INHERITED = (
        "APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PATHEXT", "PROCESSOR_ARCHITECTURE",
        "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TMP", "USERNAME", "USERPROFILE", "PROGRAMFILES", "COMSPEC",
    )
else:
    _INHERITED = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")

StderrOption = Union[None, str, Callable[[str], None], IO[str]]


def default_environment() -> dict[str, str]:
    """The few variables a server inherits by default (not secrets, just enough to run)."""
    return {k: os.environ[k] for k in _INHERITED if k in os.environ and not os.environ[k].startswith("()")}


class StdioTransport(Transport):
    """Runs ``argv`` as a subprocess and exchanges newline-delimited JSON-RPC with it."""

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
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self.process: subprocess.Popen[bytes] | None = None
        self._receiver: Receiver | None = None
        self._stdin_fd = -1
        # Writing: callers put encoded messages in the inbox; whoever gets the write
        # lock writes everything there (callers never wait for each other) and re-checks
        # the inbox after letting go. What the pipe would not take waits in ``_out``
        # for the writer thread, which ``_wake`` rouses.
        self._inbox: collections.deque[bytes] = collections.deque()
        self._out: collections.deque[memoryview] = collections.deque()
        self._write_lock = threading.Lock()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._closing = False
        self._closed = False
        self._close_lock = threading.Lock()
        self._gone: ConnectionClosed | None = None
        self._stderr_logger = logging.getLogger(f"mcpcall.server.{self.name}")

    def __repr__(self) -> str:
        pid = self.process.pid if self.process else None
        # The environment is deliberately not shown: it may hold secrets.
        return f"<StdioTransport {self.name!r} argv={self.argv[:1]!r}… pid={pid}>"

    # -- starting ----------------------------------------------------------------

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ) if self._inherit_env else default_environment()
        env.update(self._env_extra)
        return env

    def start(self, receiver: Receiver) -> None:
        self._receiver = receiver
        stderr_target: Any = subprocess.PIPE
        if self._stderr_option == "inherit":
            stderr_target = None
        elif self._stderr_option == "devnull":
            stderr_target = subprocess.DEVNULL
        try:
            self.process = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr_target,
                env=self._environment(),
                cwd=self._cwd,
                start_new_session=True,
                close_fds=True,
            )
        except FileNotFoundError as exc:
            where = f" in {self._cwd!r}" if self._cwd else ""
            raise ConnectionClosed(
                f"could not start server {self.name!r}: {exc.filename or self.argv[0]!r} not found{where} "
                f"(PATH searched: {self._environment().get('PATH', '')!r})"
            ) from exc
        except (PermissionError, NotADirectoryError, OSError) as exc:
            raise ConnectionClosed(f"could not start server {self.name!r}: {exc}") from exc
        proc = self.process
        assert proc.stdin is not None and proc.stdout is not None
        self._stdin_fd = proc.stdin.fileno()
        os.set_blocking(self._stdin_fd, False)
        # The stderr drain first: the reader joins it when stdout ends, which can be at once.
        if proc.stderr is not None:
            self._spawn(self._stderr_loop, "stderr")
        self._spawn(self._write_loop, "writer")
        self._spawn(self._read_loop, "reader")

    def _spawn(self, target: Callable[[], None], role: str) -> None:
        thread = threading.Thread(target=target, name=f"mcpcall-{role}-{self.name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    # -- writing -----------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        data = jsonrpc.encode_line(message)
        if self._gone is not None:
            raise self._gone
        if self._closing:
            raise ConnectionClosed(f"client for server {self.name!r} is closed")
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
                if written < len(data):
                    self._out.append(memoryview(data)[written:])
                    self._wake.set()
            finally:
                lock.release()

    def _broken_pipe(self, exc: OSError) -> ConnectionClosed:
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
                    if written == len(chunk):
                        out.popleft()
                        continue
                    out[0] = chunk[written:]
                    blocked = True
                    break
            self._flush_inbox()  # callers may have queued while we held the lock
            if blocked:
                # The pipe is full: wait (without the lock) until the server reads.
                try:
                    select.select([], [fd], [], 0.2)
                except (OSError, ValueError):
                    return

    # -- reading -----------------------------------------------------------------

    def _read_loop(self) -> None:
        proc = self.process
        receiver = self._receiver
        assert proc is not None and proc.stdout is not None and receiver is not None
        stdout = proc.stdout
        limit = self.max_message_bytes
        loads = jsonrpc.decode
        try:
            while True:
                line = stdout.readline(limit + 1)
                if not line:
                    break
                if len(line) > limit and not line.endswith(b"\n"):
                    self._skip_oversize(stdout, line, receiver)
                    continue
                if line.isspace():
                    continue
                try:
                    message = loads(line)
                except ProtocolError as exc:
                    log.warning("server %r wrote a line to stdout that is not JSON; skipped: %s", self.name, exc)
                    continue
                if not isinstance(message, dict):
                    log.warning("server %r wrote JSON that is not a message; skipped: %.200r", self.name, message)
                    continue
                receiver.on_message(message)
        except (OSError, ValueError) as exc:
            if not self._closing:
                log.debug("server %r: reading stdout failed: %s", self.name, exc)
        except Exception:
            log.exception("server %r: error while handling a message", self.name)
        self._on_stdout_closed()

    def _skip_oversize(self, stdout: IO[bytes], head: bytes, receiver: Receiver) -> None:
        size = len(head)
        request_id = jsonrpc.peek_id(head[:4096])
        while not head.endswith(b"\n"):
            head = stdout.readline(_CHUNK)
            if not head:
                break
            size += len(head)
        receiver.on_bad_message(
            ProtocolError(
                f"server {self.name!r} sent a message of {size} bytes or more, over the limit of "
                f"{self.max_message_bytes} bytes (raise max_message_bytes= if it is legitimate); it was skipped"
            ),
            request_id,
        )

    def _on_stdout_closed(self) -> None:
        receiver = self._receiver
        returncode = self._exit_code(wait=0.0 if self._closing else 1.0)
        if not self._closing:
            # Let the stderr drain catch the last words before reporting them.
            for thread in list(self._threads):
                if thread.name.startswith("mcpcall-stderr-") and thread.ident is not None:
                    thread.join(1.0)
        if returncode is None:
            what = "closed its stdout"
        elif returncode < 0:
            what = f"was killed by signal {-returncode}"
        else:
            what = f"exited with code {returncode}"
        reason = "the client was closed" if self._closing else "unexpectedly"
        exc = ConnectionClosed(
            f"server {self.name!r} {what} ({reason})",
            returncode=returncode,
            stderr_tail=list(self.stderr_tail),
        )
        if self._gone is None:
            self._gone = exc
        self._wake.set()
        if not self._closing:
            log.warning("%s", exc)
        if receiver is not None:
            receiver.on_close(exc)

    def _exit_code(self, wait: float) -> int | None:
        """The exit status without reaping (so the process group stays ours until close)."""
        proc = self.process
        if proc is None:
            return None
        if proc.returncode is not None:
            return proc.returncode
        deadline = time.monotonic() + wait
        while True:
            status = _peek_exit(proc.pid) if hasattr(os, "waitid") else proc.poll()
            if status is not None or time.monotonic() >= deadline:
                return status
            time.sleep(0.01)

    def _stderr_loop(self) -> None:
        proc = self.process
        assert proc is not None and proc.stderr is not None
        stream = proc.stderr
        option = self._stderr_option
        tail = self.stderr_tail
        sink: Callable[[str], None] | None = None
        if callable(option):
            sink = option
        elif option is not None and hasattr(option, "write"):
            target = option

            def sink(text: str) -> None:
                target.write(text + "\n")
                flush = getattr(target, "flush", None)
                if flush is not None:
                    flush()

        logger = self._stderr_logger
        try:
            while True:
                raw = stream.readline(_STDERR_LINE_LIMIT)
                if not raw:
                    break
                text = raw.decode("utf-8", "replace").rstrip("\r\n")
                tail.append(text if len(text) <= 1000 else text[:1000] + "…")
                if sink is not None:
                    try:
                        sink(text)
                    except Exception:
                        log.exception("stderr callback for server %r failed", self.name)
                elif option is None or option == "log":
                    logger.info("%s", text)
        except (OSError, ValueError):
            pass

    # -- closing -----------------------------------------------------------------

    @property
    def returncode(self) -> int | None:
        """The exit code once the process has ended, else ``None``."""
        return self._exit_code(0.0)

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        proc = self.process
        self._closing = True
        self._wake.set()
        if proc is None:
            return
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
        timeout = self.close_timeout
        if self._exit_code(timeout) is None:
            self._signal_group(proc.pid, signal.SIGTERM)
            if self._exit_code(timeout) is None:
                log.warning("server %r ignored SIGTERM for %.1f s; killing it", self.name, timeout)
        # Whatever the leader did, leave nothing of its group behind.
        self._signal_group(proc.pid, signal.SIGKILL)
        try:
            proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - a process in uninterruptible sleep
            log.error("server %r (pid %d) did not die after SIGKILL", self.name, proc.pid)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(2.0)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass

    def _flush_writer(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._write_lock:
                if not self._out or self._gone is not None:
                    return
            time.sleep(0.01)

    def _signal_group(self, pid: int, sig: int) -> None:
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError as exc:  # pragma: no cover
            log.warning("could not signal server %r: %s", self.name, exc)


def _peek_exit(pid: int) -> int | None:
    """The exit status of ``pid`` if it has ended, leaving it unreaped; else None."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return None
    except OSError as exc:  # pragma: no cover
        if exc.errno == errno.EINTR:
            return None
        raise
    if info is None:
        return None
    if info.si_code == os.CLD_EXITED:
        return info.si_status
    return -info.si_status
