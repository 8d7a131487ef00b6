"""Shared fixtures: every test is checked for leaked threads, child processes and file descriptors."""

from __future__ import annotations

import gc
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Optional, Set

import pytest

from tests.loadcheck import open_fds

if TYPE_CHECKING:
    from tests.servers.http_fault_server import FaultServer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SERVERS = HERE / "servers"
PYTHON = sys.executable


def child_pythonpath() -> str:
    """PYTHONPATH for a child Python that imports ``tests.*``: mcpcall's own folder first, so the child
    imports the same mcpcall as this process (the installed wheel under ``make test``), then the checkout."""
    import mcpcall

    here = str(Path(mcpcall.__file__).resolve().parents[1])
    return os.pathsep.join(dict.fromkeys([here, str(ROOT)]))


def python_argv() -> List[str]:
    """This Python, for a child that mcpcall spawns with its minimal environment (which drops PYTHONSAFEPATH):
    under ``make test`` (the installed wheel, Python 3.11+) with ``-P``, so that ``-m mcpcall...`` run in the
    checkout does not put the checkout's ``mcpcall`` first and the child tests the same package as this process."""
    if os.environ.get("MCPCALL_INSTALLED") == "1" and sys.version_info >= (3, 11):
        return [PYTHON, "-P"]
    return [PYTHON]


def demo_argv(*extra: str) -> List[str]:
    """argv for the bundled demo server."""
    return [*python_argv(), "-m", "mcpcall.demo_server", *extra]


def fault_argv(*faults: str, extra: tuple = ()) -> List[str]:
    """argv for the fault server with the given modes."""
    argv = [PYTHON, str(SERVERS / "fault_server.py")]
    for fault in faults:
        argv += ["--fault", fault]
    return argv + list(extra)


#: Processes that fixtures of a wider scope started and end themselves (a session's redis-server): not leaks of
#: the test that happened to start them (a fixture asked for with ``request.getfixturevalue`` starts after the check).
SESSION_CHILDREN: Set[int] = set()

#: How long the leak check waits for name lookup helpers (mcpcall.transports._lookups) to end on their own.
LOOKUP_WAIT = 30.0


def _mcpcall_threads() -> Set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("mcpcall-") and t.name != "mcpcall-scheduler"}


def _children() -> Set[int]:
    """pids whose parent is this process (zombies included)."""
    me = os.getpid()
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == me:
            found.add(int(entry))
    return found


@pytest.fixture(autouse=True)
def no_leaks(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that leaves an mcpcall thread, a child process or file descriptors behind."""
    if "allow_leaks" in request.keywords:
        yield
        return
    threads_before = _mcpcall_threads()
    children_before = _children()
    fds_before = open_fds()
    yield
    started = time.monotonic()
    while True:
        threads = {t for t in _mcpcall_threads() - threads_before if t.is_alive()}
        children = _children() - children_before - SESSION_CHILDREN
        fds = open_fds()
        if not threads and not children and fds <= fds_before:
            return
        # A name lookup helper a request gave up on ends when the resolver answers (a dead DNS server: up to
        # 30 s with glibc's defaults), and holds its socket until then: wait for it, not only 5 s.
        lookups_only = bool(threads) and all(t.name == "mcpcall-lookup" for t in threads)
        if time.monotonic() > started + (LOOKUP_WAIT if lookups_only else 5.0):
            break
        time.sleep(0.05)
    problems = []
    if threads:
        problems.append(f"threads still running: {sorted(t.name for t in threads)}")
    if children:
        problems.append(f"child processes left: {sorted(children)}")
    if fds > fds_before:
        problems.append(f"file descriptors: {fds_before} before, {fds} after")
    pytest.fail("leak: " + "; ".join(problems))


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] != b"Z"


def peers_dir() -> Optional[Path]:
    """Where ``make test`` installed the npm peers, if it did."""
    env = os.environ.get("MCPCALL_PEERS")
    candidates = [Path(env)] if env else []
    candidates.append(ROOT / ".npm-peers")
    for path in candidates:
        if (path / "node_modules").is_dir():
            return path
    return None


def require_peer(what: str) -> None:
    """Skip (or, under ``make test``, fail) when a real peer cannot run here."""
    message = f"{what} is not installed (run `make test`, which installs it)"
    if os.environ.get("MCPCALL_REQUIRE_PEERS") == "1":
        pytest.fail(message)
    pytest.skip(message)


def everything_argv(*mode: str) -> List[str]:
    """argv for @modelcontextprotocol/server-everything from the npm peers folder."""
    peers = peers_dir()
    node = shutil.which("node")
    script = peers / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js" if peers else None
    if node is None or script is None or not script.exists():
        require_peer("@modelcontextprotocol/server-everything (npm) with node")
    assert script is not None and node is not None
    return [node, str(script), *mode]


def run_in_threads(client: Any, total: int, threads: int, tool: str, args: Any, expected: Any) -> None:
    """``total`` futures from ``threads`` threads at once; every answer must match its call."""
    errors: list[BaseException] = []
    answers: dict[int, str] = {}
    barrier = threading.Barrier(threads)

    def worker(k: int) -> None:
        try:
            barrier.wait(10)
            futures = [(i, client.call_tool_future(tool, args(i))) for i in range(k, total, threads)]
            for i, future in futures:
                answers[i] = future.result(timeout=30).text
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(60)
    assert not errors, errors[:3]
    assert answers == {i: expected(i) for i in range(total)}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago (a connection to it is refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port on 127.0.0.1 whose listener never accepts: a client connects (the kernel does it) and is never
    read from nor answered (no reply, no TLS handshake)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield int(listener.getsockname()[1])
    finally:
        listener.close()


def http_threads() -> List[str]:
    """The names of mcpcall's HTTP worker threads alive now."""
    return [t.name for t in threading.enumerate() if t.name.startswith("mcpcall-http-") and t.is_alive()]


def stop_process(process: subprocess.Popen[Any], grace: float = 10.0, group: bool = False) -> None:
    """SIGTERM, a bounded wait, then SIGKILL (with ``group``, of the whole process group: children left behind
    by a process that did not stop in time), and reap."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    if group:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if process.poll() is None:
        process.kill()
    process.wait(10)


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Poll ``predicate`` until it holds (True) or ``timeout`` passes (False)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@contextmanager
def running_fault_server(**options: Any) -> Iterator[FaultServer]:
    """A :class:`~tests.servers.http_fault_server.FaultServer` (``options`` for its constructor), started in this
    process; stopped on leaving, after a garbage collection. An error raised from a call sits in a reference cycle
    (traceback -> frame -> future -> error) that keeps the closed client's pooled sockets open until the next
    collection (tests/transports/test_http.py, test_close_releases_sockets_while_an_error_is_held, shows that bug
    on its own): collecting here keeps the leak check of every test about that test's subject."""
    from tests.servers.http_fault_server import FaultServer

    server = FaultServer(**options).start()
    try:
        yield server
    finally:
        gc.collect()
        server.stop()


@pytest.fixture
def server() -> Iterator[FaultServer]:
    """A fault server on 127.0.0.1 (tests/servers/http_fault_server.py). A module that means another server by
    ``server`` defines its own; one that wants this one set up otherwise overrides it, asking for it."""
    with running_fault_server() as fault:
        yield fault


@pytest.fixture
def other() -> Iterator[FaultServer]:
    """A second fault server, on another port: another origin, which must never hear from a client of ``server``."""
    with running_fault_server() as fault:
        yield fault


@pytest.fixture
def other_host() -> Iterator[FaultServer]:
    """A second fault server on another host of loopback (127.0.0.2): it must never hear from a client of ``server``."""
    with running_fault_server(host="127.0.0.2") as fault:
        yield fault


@pytest.fixture
def canary() -> Iterator[tuple]:
    """An HTTP server on 127.0.0.1 that serves a schema (``{"type": "integer"}``) at every path and notes each
    path asked for: (its origin, the list of paths asked for). For what must never fetch anything."""
    import http.server

    hits: List[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the base class's name
            hits.append(self.path)
            body = b'{"type": "integer"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One throwaway redis-server for the session (tests/redis_server.py): its ``redis://127.0.0.1:PORT``."""
    from . import redis_server as servers

    pytest.importorskip("redis")
    process, port = servers.start(tmp_path_factory.mktemp("redis"))
    SESSION_CHILDREN.add(process.pid)
    try:
        yield f"redis://127.0.0.1:{port}"
    finally:
        stop_process(process)
        SESSION_CHILDREN.discard(process.pid)


@pytest.fixture
def redis_url(redis_server: str) -> str:
    """The session's redis-server, emptied for this test: its database 0 as a URL."""
    import redis

    client = redis.Redis.from_url(redis_server, socket_timeout=5, socket_connect_timeout=5)
    try:
        client.flushall()
    finally:
        client.close()
        client.connection_pool.disconnect()
    return f"{redis_server}/0"


def pytest_configure(config: pytest.Config) -> None:
    # `make test` tests the installed wheel (MCPCALL_INSTALLED=1): stop at once if the checkout's mcpcall was imported.
    if os.environ.get("MCPCALL_INSTALLED") == "1":
        import mcpcall

        if Path(mcpcall.__file__).resolve().parent == ROOT / "mcpcall":
            pytest.exit(f"MCPCALL_INSTALLED=1 but mcpcall was imported from the checkout ({mcpcall.__file__}), "
                        "not the installed wheel: run .venv/bin/pytest --import-mode=append (see the Makefile)", 4)
    config.addinivalue_line("markers", "allow_leaks: do not check this test for leaked threads/processes/fds")


def self_signed_cert(directory: Path) -> tuple:
    """A self-signed CA certificate for 127.0.0.1 (its IP in the subjectAltName) and its key, as PEM files in
    ``directory``: (cert path, key path)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_file), str(key_file)
