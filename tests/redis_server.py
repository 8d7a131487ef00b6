"""A throwaway ``redis-server`` (Debian's) on 127.0.0.1 at a free port, with no persistence, for the tests that need one.

:func:`start` runs it in the foreground of a child process and returns once it answers ``PING``;
:func:`tests.conftest.stop_process` ends it (SIGTERM, a bounded wait, SIGKILL) and reaps it. ``tests/conftest.py``
makes one per test session (fixture ``redis_server``) and empties it before each test that asks
for ``redis_url``; a test that stops its server starts one of its own.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Optional

from .conftest import free_port, require_peer, stop_process, wait_until


def tail(path: Path, lines: int = 40) -> str:
    """The last lines of a log file, for a failure message."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _start_once(binary: str, port: int, data: Path, log_path: Path) -> "Optional[subprocess.Popen[bytes]]":
    import redis

    with open(log_path, "ab") as log_file:
        process = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--daemonize", "no", "--dir", str(data)],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
        )
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1, socket_timeout=1)

    def answers() -> bool:
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False

    try:
        up = wait_until(lambda: process.poll() is not None or answers(), timeout=15)
    finally:
        client.close()
        client.connection_pool.disconnect()
    if up and process.poll() is None:
        return process
    stop_process(process, grace=5)
    return None


def start(directory: Path) -> "tuple[subprocess.Popen[bytes], int]":
    """A redis-server whose files and log are in ``directory``: (its process, its port). Skips without redis-server."""
    binary = shutil.which("redis-server")
    if binary is None:
        require_peer("redis-server (Debian: apt-get install redis-server)")
    assert binary is not None
    directory.mkdir(parents=True, exist_ok=True)
    log_path = directory / "redis.log"
    for _attempt in range(3):  # another process may take the free port before redis binds it
        port = free_port()
        process = _start_once(binary, port, directory, log_path)
        if process is not None:
            return process, port
    raise RuntimeError(f"redis-server did not start:\n{tail(log_path)}")
