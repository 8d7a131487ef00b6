"""The process behind a stdio server: starting it, its environment, its exit status, ending it.

The server runs in a new session, so its process group holds what it spawned
too (``npx``/``uvx`` children). Closing follows a ladder: the transport closes
stdin (its pipe), then :func:`end_group` waits, SIGTERMs the process group,
waits, SIGKILLs the group and reaps. Until that reap the process is never
reaped (:func:`exit_code` peeks), so its pid, and the group, stay ours.

This module knows nothing of pipes' contents, threads or JSON-RPC: that is
:mod:`mcpcall.transports.stdio`, which imports it (never the other way).
"""

from __future__ import annotations

import errno
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError, ConnectionClosed
from ..urls import redact_url

__all__ = ["default_environment"]

log = logging.getLogger("mcpcall.stdio")

_TERMINATE_GRACE = 0.5  # terminate(): how long SIGTERM has before SIGKILL

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    _INHERITED = (
        "APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PATHEXT", "PROCESSOR_ARCHITECTURE",
        "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TMP", "USERNAME", "USERPROFILE", "PROGRAMFILES", "COMSPEC",
    )
else:
    _INHERITED = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


def default_environment() -> dict[str, str]:
    """The few variables a server inherits by default (not secrets, just enough to run)."""
    return {k: os.environ[k] for k in _INHERITED if k in os.environ and not os.environ[k].startswith("()")}


def unlaunchable(text: str) -> str | None:
    """Why ``text`` cannot be an argument, an environment entry or the folder of a process; None when it can."""
    if "\0" in text:
        return "holds a NUL character"
    try:
        os.fsencode(text)
    except UnicodeEncodeError:  # (its object is the whole text: never kept)
        return "holds a character this system cannot encode (a lone surrogate?)"
    return None


def _launch_problem(argv: Sequence[str], environment: Mapping[str, str], cwd: str | None) -> str | None:
    """What in ``argv``, ``environment`` or ``cwd`` no process can be started with (never a value: it may be a
    secret); None when all can. subprocess would raise a bare ValueError or UnicodeEncodeError for it."""
    for i, arg in enumerate(argv):
        why = unlaunchable(arg)
        if why is not None:
            return f"its {'command' if i == 0 else f'argument {i}'} {why}"
    for key, value in environment.items():
        if not key or "=" in key or unlaunchable(key) is not None:
            return f"{key!r:.80} cannot be the name of an environment variable"
        why = unlaunchable(value)
        if why is not None:
            return f"the value of its environment variable {key!r} {why}"
    why = unlaunchable(cwd) if cwd is not None else None
    return None if why is None else f"its working directory {why}"


def spawn(argv: Sequence[str], *, name: str, environment: Mapping[str, str], cwd: str | None,
          stderr: Any) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a session of its own, stdin and stdout piped; a failure is a ConnectionClosed that says why
    (a :class:`~mcpcall.errors.ConfigError` for what no process can be started with: a NUL, an unencodable character)."""
    problem = _launch_problem(argv, environment, cwd)
    if problem is not None:
        raise ConfigError(f"cannot start server {name!r}: {problem}")
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=environment,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
    except FileNotFoundError as exc:
        raise ConnectionClosed(_not_found(name, str(exc.filename or argv[0]), cwd, environment)) from None
    except OSError as exc:  # PermissionError, NotADirectoryError, too many processes, …
        raise ConnectionClosed(f"could not start server {name!r}: {exc}") from exc


def pidfd(pid: int) -> int:
    """A descriptor that polls readable when ``pid`` exits (Linux 5.3+), else -1."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return -1
    try:
        return int(opener(pid))
    except OSError:
        return -1


def exit_code(proc: subprocess.Popen[bytes] | None, wait: float) -> int | None:
    """The exit status without reaping (so the process group stays ours until close)."""
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


def how_it_ended(returncode: int) -> str:
    return f"was killed by signal {-returncode}" if returncode < 0 else f"exited with code {returncode}"


def signal_group(pid: int, sig: int, name: str) -> None:
    """Send ``sig`` to the process group of server ``name`` (led by ``pid``); one already gone is no error."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError as exc:  # pragma: no cover
        log.warning("could not signal server %r: %s", name, str(exc))


def end_group(proc: subprocess.Popen[bytes], name: str, close_timeout: float, *, graceful: bool) -> None:
    """The ladder once stdin is closed: wait, SIGTERM the group, wait, SIGKILL the group, reap.

    Not graceful (a failed connect): SIGTERM at once, and a shorter wait after it.
    """
    timeout = close_timeout if graceful else min(close_timeout, _TERMINATE_GRACE)
    if not graceful or exit_code(proc, timeout) is None:
        signal_group(proc.pid, signal.SIGTERM, name)
        if exit_code(proc, timeout) is None:
            log.warning("server %r ignored SIGTERM for %.1f s; killing it", name, timeout)
    # Whatever the leader did, leave nothing of its group behind.
    signal_group(proc.pid, signal.SIGKILL, name)
    try:
        proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process in uninterruptible sleep
        log.error("server %r (pid %d) did not die after SIGKILL", name, proc.pid)


def forget_pipes(proc: subprocess.Popen[bytes] | None) -> None:
    """In a forked child: drop our copies of the parent's pipes to the server; touch nothing else."""
    for stream in (proc.stdin, proc.stdout, proc.stderr) if proc is not None else ():
        raw = getattr(stream, "raw", None)
        if raw is not None:
            try:
                raw.close()  # the raw file: no lock; the buffered one then counts as closed
            except OSError:
                pass


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


_HOST_PORT = re.compile(r"^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}(?:[/?#].*)?$")
_HOST_PATH = re.compile(r"^[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+/.*$")
_LOCAL_HOST = re.compile(r"^(?:localhost|[0-9.]+|\[[0-9A-Fa-f:.]+\])(?::|/|$)")


def _not_found(server: str, program: str, cwd: str | None, environment: Mapping[str, str]) -> str:
    """The message for a program that does not exist: no directory of PATH in it, nor anything else of the environment."""

    text = f"could not start server {server!r}: {redact_url(program)!r} not found"
    is_path = os.sep in program or bool(os.altsep and os.altsep in program)
    if is_path:
        text += f" (relative to {cwd!r})" if cwd and not os.path.isabs(program) else ""
    else:
        path = environment.get("PATH")
        text += " (the server's environment has no PATH)" if path is None else \
            f" on PATH ({len([d for d in path.split(os.pathsep) if d])} directories searched)"
    if "@" not in program and (_HOST_PORT.match(program) or _HOST_PATH.match(program)):
        scheme = "http" if _LOCAL_HOST.match(program) or _HOST_PORT.match(program) else "https"
        return text + f"; did you mean {redact_url(f'{scheme}://{program}')}? (a URL needs its scheme)"
    return text + ("; check the path" if is_path else "; is it installed? Give its absolute path")
