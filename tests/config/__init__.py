"""Tests of mcpcall.config: reading config files, expansion, OAuth settings of an entry, connecting."""
