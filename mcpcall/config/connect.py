"""One server of a config, checked and expanded (:class:`ServerConfig`), and connecting it.

:func:`connect` is :func:`mcpcall.connect` once the server spec is read (the
package's function reads a bare entry or a whole config first): it builds the
transport (:func:`~mcpcall.config.make_transport`) and the :class:`~mcpcall.client.Client`,
connects it, and lets :mod:`mcpcall.notebook` claim it. ``ServerConfig.connect()``
calls it directly, so config imports nothing above itself.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import FrameType
from typing import Any

from ..client import Client, Handler
from ..session.inbound import LogCallback, RootsOption
from ..types import Implementation
from .oauth_settings import OAuthSettings
from .transports import ServerSpec, make_transport, redact_url

__all__ = ["ServerConfig", "connect"]


@dataclass(frozen=True, repr=False)
class ServerConfig:
    """One server of a config file, checked and expanded, not started.

    ``spec`` is what :func:`mcpcall.connect` takes: ``{"name", "command",
    "args", "env"[, "cwd"]}`` or ``{"name", "url", "headers", "transport"}``.
    The repr shows no env or header value.
    """

    name: str
    spec: dict[str, Any]
    timeout: float | None = None
    disabled: bool = False
    source: str | None = None

    @property
    def kind(self) -> str:
        """``"http"`` for a server with a URL, else ``"stdio"``."""
        return "http" if "url" in self.spec else "stdio"

    @property
    def oauth(self) -> OAuthSettings | None:
        """The entry's OAuth client settings, if it has any."""
        value = self.spec.get("oauth")
        return value if isinstance(value, OAuthSettings) else None

    def __repr__(self) -> str:
        target = f"url={redact_url(self.spec['url'])!r}" if self.kind == "http" else \
            f"command={redact_url(str(self.spec.get('command', '')))!r}"
        return f"ServerConfig(name={self.name!r}, kind={self.kind!r}, {target}, disabled={self.disabled!r})"

    def connect(self, **options: Any) -> Client:
        """Start or reach this server: :func:`mcpcall.connect` with its spec, name and timeout.

        ``options`` are those of :func:`mcpcall.connect`; a ``name`` or
        ``timeout`` given here wins over the config's.
        """
        options.setdefault("name", self.name)
        if self.timeout is not None:
            options.setdefault("timeout", self.timeout)
        return connect(_Expanded(self.spec), sys._getframe(1), **options)


class _Expanded(dict[str, Any]):
    """A spec already checked and expanded (a :class:`ServerConfig`'s): connect() must not expand it again."""


def connect(
    server: ServerSpec,
    caller: FrameType | None,
    *,
    timeout: float | None = None,
    protocol: str = "auto",
    client_info: Implementation | Mapping[str, Any] | None = None,
    stderr: Any = None,
    env: Mapping[str, str] | None = None,
    inherit_env: bool | None = None,
    cwd: str | None = None,
    name: str | None = None,
    handlers: Mapping[str, Handler] | None = None,
    capabilities: Mapping[str, Any] | None = None,
    probe_timeout: float = 5.0,
    log_level: str | None = None,
    max_message_bytes: int | None = None,
    close_timeout: float | None = None,
    headers: Mapping[str, str] | None = None,
    auth: Any = None,
    token_store: Any = None,
    verify: bool | str | None = None,
    cert: str | tuple[str, str] | None = None,
    proxies: Mapping[str, str] | None = None,
    transport: str | None = None,
    connect_timeout: float = 10.0,
    read_timeout: float | None = None,
    max_workers: int = 8,
    validate_output: bool = True,
    validate_arguments: bool = False,
    sampling: Handler | None = None,
    elicitation: Handler | None = None,
    roots: RootsOption = None,
    on_log: LogCallback | None = None,
    cache: bool = True,
    start: bool = True,
) -> Client:
    """:func:`mcpcall.connect` for a server spec already read: build the transport and the client, connect, claim.

    ``server`` is what :func:`~mcpcall.config.make_transport` takes (a
    :class:`ServerConfig`'s spec is checked and expanded already); ``caller``
    is the frame of the code that asked to connect, for
    :func:`mcpcall.notebook.claim`. The options are :func:`mcpcall.connect`'s.
    """
    from ..notebook import claim  # only connect() uses it

    if timeout is None:
        timeout = 60.0
    http: dict[str, Any] = {
        "connect_timeout": connect_timeout,
        "read_timeout": read_timeout,
        "max_workers": max_workers,
    }
    for key, value in (("headers", headers), ("auth", auth), ("verify", verify), ("cert", cert),
                       ("proxies", proxies), ("transport", transport), ("token_store", token_store)):
        if value is not None:
            http[key] = value
    built = make_transport(
        server,
        name=name,
        env=env,
        inherit_env=inherit_env,
        cwd=cwd,
        stderr=stderr,
        max_message_bytes=max_message_bytes,
        close_timeout=close_timeout,
        http=http,
    )
    client = Client(
        built,
        timeout=timeout,
        protocol=protocol,
        client_info=client_info,
        handlers=handlers,
        capabilities=capabilities,
        probe_timeout=probe_timeout,
        log_level=log_level,
        validate_output=validate_output,
        validate_arguments=validate_arguments,
        sampling=sampling,
        elicitation=elicitation,
        roots=roots,
        on_log=on_log,
        cache=cache,
    )
    if not start:
        return client
    return claim(client.connect(), server, caller)
