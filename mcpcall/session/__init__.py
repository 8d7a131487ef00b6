"""The parts of a client's session that :class:`mcpcall.Client` composes (eras, calls, inbound, tools, cache, tasks, ...)."""
