"""The package version (one place, read by setup.cfg too)."""

__version__ = "0.1.0"
