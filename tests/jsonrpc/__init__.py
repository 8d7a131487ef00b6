"""Tests of the ground floor: JSON-RPC framing, the SSE decoder, types, schemas, HTML and the nesting limits."""
