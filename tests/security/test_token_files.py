"""Token files are private to their owner whatever the umask, and one that others could read is refused."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpcall.auth.tokens import FileTokenStore, InsecureTokenFile, Token

ISSUER, RESOURCE = "https://as.example.com", "https://mcp.example.com/mcp"
ACCESS, REFRESH = "at-s3cr3t-value", "rt-s3cr3t-value"


def _token() -> Token:
    body = {"access_token": ACCESS, "refresh_token": REFRESH, "token_type": "Bearer", "expires_in": 3600}
    return Token.from_response(body, issuer=ISSUER, resource=RESOURCE)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """Files and directories created while inside get every permission the code asks for (umask 000)."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_files_and_the_directory_made_are_owner_only_even_with_umask_000(tmp_path: Path, open_umask: None) -> None:
    path = tmp_path / "cache" / "mcpcall" / "tokens.json"
    store = FileTokenStore(path)
    token = _token()
    store.put(token)
    store.put_client(ISSUER, {"client_id": "c", "client_secret": "cs-s3cr3t"})
    assert _mode(path) == 0o600
    assert _mode(Path(str(path) + ".lock")) == 0o600
    assert _mode(path.parent) == 0o700
    assert FileTokenStore(path).get(ISSUER, RESOURCE) == token


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o606, 0o620])
def test_a_token_file_others_can_read_or_write_is_refused_and_left_alone(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "tokens.json"
    FileTokenStore(path).put(_token())
    os.chmod(path, mode)
    store = FileTokenStore(path)
    for use in (lambda: store.get(ISSUER, RESOURCE), lambda: store.put(_token()), lambda: store.get_clients(ISSUER)):
        with pytest.raises(InsecureTokenFile) as refused:
            use()
        assert ACCESS not in str(refused.value) and REFRESH not in str(refused.value)
    assert _mode(path) == mode  # not silently changed: its tokens may have been read; the user decides


def test_a_token_path_that_is_a_symlink_or_not_a_file_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    FileTokenStore(real).put(_token())
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with pytest.raises(OSError):
        FileTokenStore(link).get(ISSUER, RESOURCE)
    fifo = tmp_path / "fifo.json"  # opening it to read would wait for a writer, for ever
    os.mkfifo(fifo, 0o600)
    outcome: list[BaseException] = []

    def read_fifo() -> None:
        try:
            FileTokenStore(fifo).get(ISSUER, RESOURCE)
        except BaseException as exc:  # noqa: BLE001 - looked at below
            outcome.append(exc)

    reader = threading.Thread(target=read_fifo, daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # blocked in open(): a writer lets it go, then the test fails
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
        pytest.fail("reading a token path that is a FIFO blocked")
    assert len(outcome) == 1 and isinstance(outcome[0], InsecureTokenFile) and "not a regular file" in str(outcome[0])
    with pytest.raises(InsecureTokenFile, match="not a regular file"):
        FileTokenStore(tmp_path).get(ISSUER, RESOURCE)


def test_the_refresh_lock_files_are_owner_only_and_never_followed_through_a_symlink(tmp_path: Path, open_umask: None) -> None:
    """The sidecar files whose flock is a key's refresh lock (and the file lock): 0600, and a symbolic link planted at
    their name (by whoever can write the directory) makes mcpcall create or open nothing where it points."""
    path = tmp_path / "tokens" / "tokens.json"
    store = FileTokenStore(path)
    with store.lock(ISSUER, RESOURCE, timeout=1):
        pass
    assert _mode(Path(store.refresh_lock_path(ISSUER, RESOURCE))) == 0o600
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = "https://other.example.com/mcp"
    planted = {Path(store.refresh_lock_path(ISSUER, other)): elsewhere / "made-by-the-refresh-lock",
               Path(str(path) + ".lock"): elsewhere / "made-by-the-file-lock"}
    for link, target in planted.items():
        if link.exists():
            link.unlink()
        link.symlink_to(target)
    with pytest.raises(OSError):
        with store.lock(ISSUER, other, timeout=1):
            pytest.fail("took a lock through a symbolic link")
    with pytest.raises(OSError):
        store.put(_token())
    assert sorted(p.name for p in elsewhere.iterdir()) == []
