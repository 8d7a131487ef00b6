"""Tests of the transports: stdio (the process and the pipes), Streamable HTTP and SSE, large results, fork."""
