"""mcpcall's tests, in folders as the package's layers are, so the tests of a module are found beside its layer's:

- ``jsonrpc/``: the ground floor (JSON-RPC framing, the SSE decoder, types, schemas, HTML, nesting limits, properties)
- ``transports/``: stdio, Streamable HTTP and SSE, large results, fork
- ``session/``: the dispatcher, the session and the client surface (pending requests, tasks, MRTR, callbacks)
- ``config/``, ``auth/``, ``registry/``, ``cli/``: those layers of the package
- ``peers/``: real third-party servers (the official SDKs, FastMCP 1.x, server-everything)
- ``examples/``: the scripts, notebook and framework apps of ``examples/``, run as users run them
- here: the whole package (packaging, import cost, leaks, the benchmark table)

``conftest.py`` here holds what every folder needs (the leak check, ``python_argv``, ``demo_argv``, the peers); a
folder's own ``conftest.py`` what only its tests use. ``servers/`` are the peers the tests start, ``conformance/``
runs the official conformance suite, ``import_graph.py`` prints the package's import graph.
"""
