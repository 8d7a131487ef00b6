"""Configuration: from what a user names to a transport, and the config files people already have.

- :mod:`mcpcall.config.transports`: one server spec (argv list, command string,
  URL, ``mcpServers``-style entry) to a transport (:func:`make_transport`);
  :func:`redact_url` and :func:`is_url` are :mod:`mcpcall.urls`'s, re-exported;
- :mod:`mcpcall.config.reading`: ``mcpServers`` / VS Code ``servers`` files to
  :class:`ServerConfig` objects (:func:`load_config`, :func:`find_config`), each entry
  checked by :mod:`~mcpcall.config.entries`, its ``${...}`` values expanded by
  :mod:`~mcpcall.config.expand`, its OAuth settings read by :mod:`~mcpcall.config.oauth_settings`;
- :mod:`mcpcall.config.connect`: :class:`ServerConfig`, one server ready to connect;
- :mod:`mcpcall.config.files`: the names of the module that did all of this before, importable as before.

Nothing here starts a process or opens a connection (but ``ServerConfig.connect()``).

It may import auth, the client and everything below them; never the registry or the CLI.
"""

from __future__ import annotations

from .connect import ServerConfig
from .oauth_settings import OAuthSettings
from .reading import find_config, load_config
from .transports import ServerSpec, is_url, make_transport, redact_url

# Private helpers of the former single module, still importable from here.
from .transports import _check_headers as _check_headers
from .transports import _default_name as _default_name
from .transports import _http_transport as _http_transport
from .transports import _name_of_target as _name_of_target
from .transports import _parse_bool as _parse_bool
from .transports import _parse_verify as _parse_verify
from .transports import _shown as _shown

__all__ = ["OAuthSettings", "ServerConfig", "ServerSpec", "find_config", "is_url", "load_config", "make_transport", "redact_url"]
