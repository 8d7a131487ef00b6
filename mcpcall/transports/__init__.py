"""Transports: how messages travel (stdio pipes, in-memory for tests)."""

from .base import Receiver, Transport

__all__ = ["Receiver", "Transport"]
