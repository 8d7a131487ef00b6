"""One server of a config, checked and expanded (:class:`ServerConfig`), and connecting it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .oauth_settings import OAuthSettings
from .transports import redact_url

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["ServerConfig"]


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
        from .. import connect

        options.setdefault("name", self.name)
        if self.timeout is not None:
            options.setdefault("timeout", self.timeout)
        return connect(_Expanded(self.spec), **options)


class _Expanded(dict[str, Any]):
    """A spec already checked and expanded (a :class:`ServerConfig`'s): connect() must not expand it again."""
