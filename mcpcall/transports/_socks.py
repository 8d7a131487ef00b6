"""Connections through a SOCKS proxy that an exchange can abort, as it aborts direct ones.

With a ``socks5://`` (``socks5h://``, ``socks4://``, ``socks4a://``) proxy,
requests hands the traffic to ``urllib3.contrib.socks`` when PySocks is
installed (``requests[socks]``); its connections open their sockets inside
PySocks, out of an exchange's reach. The pools here make the same connections
the way :mod:`._exchanges` makes direct ones: the proxy's name (and, with
``socks5://`` and ``socks4://``, where the client resolves, the server's) is
looked up through :func:`._lookups.resolve`; the socket to the proxy is in the
exchange before its TCP connect starts, which does not block
(:func:`._exchanges.connect_socket`); an abort then shuts it during the
connect, the SOCKS negotiation and the TLS handshake. Without PySocks nothing
here is used, and requests refuses SOCKS proxy URLs as it always has.
"""

from __future__ import annotations

import importlib
import socket
from typing import Any

from ._exchanges import (
    Exchange,
    _Tracking,
    connect_first,
    connect_socket,
    connect_timeout,
    current_exchange,
    untracking_pool,
)
from ._lookups import is_address, resolve

__all__ = ["socks_pool_classes"]

_classes: dict[str, Any] = {}


def socks_pool_classes() -> dict[str, Any] | None:
    """urllib3's SOCKS pool classes (by scheme), their connections tracked; None without PySocks."""
    if _classes:
        return _classes
    try:
        socks = importlib.import_module("socks")  # PySocks (no type hints)
        from urllib3.contrib import socks as contrib
    except ImportError:
        return None

    base: Any = socks.socksocket

    class _Socket(base, _Connecting):  # type: ignore[misc]
        """PySocks' socket, whose connect to the proxy is :func:`connect_socket`."""

    def new_conn(connection: Any, exchange: Exchange) -> socket.socket:
        """What ``SOCKSConnection._new_conn`` does (urllib3's errors included), inside ``exchange``."""
        from urllib3 import exceptions

        try:
            return _open(connection, exchange, _Socket)
        except socket.gaierror as exc:
            resolution = getattr(exceptions, "NameResolutionError", None)  # urllib3 >= 2
            if resolution is not None:
                raise resolution(connection.host, connection, exc) from exc
            raise exceptions.NewConnectionError(connection, f"Failed to establish a new connection: {exc}") from exc
        except (socket.timeout, socks.ProxyError) as exc:
            cause = getattr(exc, "socket_err", None) or exc
            if isinstance(cause, socket.timeout):
                raise exceptions.ConnectTimeoutError(
                    connection, f"Connection to {connection.host} timed out. (connect timeout={connection.timeout})",
                ) from exc
            raise exceptions.NewConnectionError(connection, f"Failed to establish a new connection: {cause}") from exc
        except OSError as exc:
            raise exceptions.NewConnectionError(connection, f"Failed to establish a new connection: {exc}") from exc

    class _SOCKSTracking(_Tracking):
        def _new_conn(self) -> socket.socket:
            exchange = current_exchange()
            if exchange is None:
                return super()._new_conn()
            return new_conn(self, exchange)

    class _SOCKSConnection(_SOCKSTracking, contrib.SOCKSConnection):
        pass

    class _SOCKSHTTPSConnection(_SOCKSTracking, contrib.SOCKSHTTPSConnection):
        pass

    _classes.update(http=untracking_pool(contrib.SOCKSHTTPConnectionPool, _SOCKSConnection),
                    https=untracking_pool(contrib.SOCKSHTTPSConnectionPool, _SOCKSHTTPSConnection))
    return _classes


class _Connecting(socket.socket):
    """Mixed in after PySocks' socket: its TCP connect to the proxy, inside the socket's exchange."""

    _mcpcall_exchange: Exchange | None = None

    def connect(self, address: Any) -> None:
        exchange = self._mcpcall_exchange
        if exchange is None:
            super().connect(address)
        else:
            connect_socket(self, address, exchange, super().gettimeout())  # the timeout PySocks set for it


def _open(connection: Any, exchange: Exchange, kind: Any) -> socket.socket:
    """PySocks' ``create_connection`` with every lookup abortable and the socket in ``exchange`` from the start."""
    socks = importlib.import_module("socks")

    options = connection._socks_options
    version, rdns = options["socks_version"], options["rdns"]
    timeout = connect_timeout(connection)
    host = connection.host.strip("[]")
    if not rdns and not is_address(host):  # the client resolves the server's name: here, not inside PySocks
        family = socket.AF_INET if version == socks.SOCKS4 else socket.AF_UNSPEC
        host = resolve(exchange, timeout, host, connection.port, family, socket.SOCK_STREAM)[0][4][0]
    proxy_host = str(options["proxy_host"]).strip("[]")
    proxy_port = options["proxy_port"] or socks.DEFAULT_PORTS[version]
    def make(family: int, sock_type: int, proto: int) -> Any:
        sock = kind(family, sock_type, proto)
        for option in connection.socket_options or ():
            sock.setsockopt(*option)
        sock.settimeout(timeout)
        return sock

    def link(sock: Any, address: Any) -> None:
        # The proxy by its address: PySocks would connect to it by name, a lookup inside connect().
        sock.set_proxy(version, address[0], address[1], rdns, options["username"], options["password"])
        sock._mcpcall_exchange = exchange
        try:
            sock.connect((host, connection.port))  # socks.ProxyError is an OSError
        finally:
            sock._mcpcall_exchange = None

    rows = resolve(exchange, timeout, proxy_host, proxy_port, 0, socket.SOCK_STREAM)
    return connect_first(connection, exchange, rows, make, link)  # type: ignore[no-any-return]
