"""mcpcall.integrations through each agent framework's own execution path, with scripted models (run in .venv-int)."""
