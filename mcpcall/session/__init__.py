"""The parts of a client's session that :class:`mcpcall.Client` composes (eras, calls, inbound, tools, cache, tasks, ...).

It may import the dispatcher, the callbacks thread, the transports and the ground floor; never the client,
auth, config, the registry or the CLI.
"""
