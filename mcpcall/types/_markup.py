"""The pieces every HTML view is made of: escaping, cutting, sizes, media inlined when safe, links.

The bottom of :mod:`mcpcall.types`' HTML: :mod:`.content` (a block's own view) and :mod:`.html` (every
other view) both build on it; it imports nothing of mcpcall.
"""

from __future__ import annotations

import base64
import json
import re
from html import escape
from typing import Any

MAX_TEXT = 2000  #: characters of one text shown before "… (N more characters)"
MAX_INLINE_BYTES = 2 * 1024 * 1024  #: image or audio bytes put inline as a data: URI
INLINE_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_AUDIO_TYPE = re.compile(r"audio/[a-z0-9][a-z0-9.+-]{0,63}\Z")
_LINK_SCHEMES = ("http://", "https://")
_PRE = "white-space:pre-wrap;margin:2px 0"


def _cut(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` escaped, cut at ``limit`` characters with a note of what was left out."""
    if len(text) <= limit:
        return escape(text)
    return f"{escape(text[:limit])}<i>… ({len(text) - limit} more characters)</i>"


def _json(value: Any, limit: int = MAX_TEXT) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, indent=2, default=repr)
    except (TypeError, ValueError):  # a cycle, a key that is not a string
        try:
            text = repr(value)
        except RecursionError:
            text = "(nested too deeply to show)"
    except RecursionError:  # a server's value nested deeper than Python recurses
        text = "(nested too deeply to show)"
    return f'<pre style="{_PRE}">{_cut(text, limit)}</pre>'


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} bytes"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f} KiB"
    return f"{count / (1024 * 1024):.1f} MiB"


def _code(text: str) -> str:
    return f"<code>{_cut(text, 200)}</code>"


def _media(kind: str, mime: str, data: bytes) -> str:
    """Inline ``data`` (kind "image" or "audio") when its type is safe and it is small enough; else describe it."""
    clean = mime.strip().lower()
    safe = clean in INLINE_IMAGE_TYPES if kind == "image" else bool(_AUDIO_TYPE.match(clean))
    about = f"{kind} {_code(mime)}, {_size(len(data))}"
    if not safe:
        return f"<div><i>{about} (this type is not shown inline)</i></div>"
    if len(data) > MAX_INLINE_BYTES:
        return f"<div><i>{about} (larger than {_size(MAX_INLINE_BYTES)}: not shown inline)</i></div>"
    uri = f"data:{clean};base64,{base64.b64encode(data).decode('ascii')}"
    if kind == "image":
        return f'<div><img src="{uri}" alt="{escape(clean)} image" style="max-width:100%"></div>'
    return f'<div><audio controls src="{uri}"></audio> <small>{about}</small></div>'


def _link(uri: str, label: str) -> str:
    if uri.lower().startswith(_LINK_SCHEMES):
        return f'<a href="{escape(uri)}" target="_blank" rel="noopener noreferrer">{_cut(label, 300)}</a>'
    return _code(uri) if label == uri else f"{_cut(label, 300)} ({_code(uri)})"
