"""A response body read as a JSON object: the one piece :mod:`.flow` and :mod:`.jose` share (neither imports the other for it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import requests


def _json_object(response: requests.Response) -> dict[str, Any] | None:
    """The body as a JSON object, or ``None`` when it is not one."""
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None
