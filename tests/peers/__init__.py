"""Real third-party servers: the official SDKs (2.x, FastMCP 1.x) and server-everything."""
