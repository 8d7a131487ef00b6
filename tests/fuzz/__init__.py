"""Fuzzing of everything a server controls: property-based tests (Hypothesis) and two atheris harnesses.

Each ``test_fuzz_*.py`` feeds one kind of server input to the package: JSON-RPC lines and bodies
(``jsonrpc``, ``pieces``, the dispatcher), SSE streams, typed results (and a whole client), tool schemas
(checks and regexes, the registry's exports, the integrations' models), OAuth documents and headers,
config files. Each asserts that only the documented errors come out, that nothing hangs, and that no
step's cost grows faster than what the server sent (``cost.py``: counted steps, or best-of times where
the work is C). ``strategies.py`` holds what a hostile server sends; ``profiles.py`` the Hypothesis
settings (``MCPCALL_FUZZ=ci``, the default: derandomized; ``random``; ``deep``: twenty times the examples).

``atheris_jsonrpc.py`` and ``atheris_sse.py`` are coverage-guided harnesses, run by ``make fuzz``, not by
``make test``; ``isolated_patterns.py`` runs in a child interpreter (see ``test_fuzz_schema.py``).
"""
