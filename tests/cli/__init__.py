"""Tests of the command line (mcpcall ...), at a pipe and at a terminal."""
