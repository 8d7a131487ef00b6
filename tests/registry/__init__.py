"""Tests of mcpcall.registry: many servers behind one registry, formats, names and messages."""
