"""Fixtures of the transport tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import self_signed_cert


@pytest.fixture
def ca_file(tmp_path: Path) -> str:
    """A self-signed certificate for 127.0.0.1, as a CA file (for a TLS handshake that never gets far enough to
    check it)."""
    return str(self_signed_cert(tmp_path)[0])
