"""Where config files were read, before the job was split: its names, importable from here as before.

:mod:`.reading` reads the files (:func:`load_config`, :func:`find_config`),
:mod:`.oauth_settings` an entry's OAuth settings (:class:`OAuthSettings`),
:mod:`.connect` holds :class:`ServerConfig`. New code imports them from
:mod:`mcpcall.config` (or ``mcpcall``).
"""

from __future__ import annotations

from .connect import ServerConfig
from .oauth_settings import OAuthSettings, oauth_settings
from .reading import find_config, load_config

__all__ = ["OAuthSettings", "ServerConfig", "find_config", "load_config", "oauth_settings"]
