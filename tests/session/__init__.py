"""Tests of the dispatcher, the session and the client surface (in memory, fault servers and the bundled demo server)."""
