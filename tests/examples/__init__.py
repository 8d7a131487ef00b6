"""The examples/ folder run as users run it: scripts, the notebook, Flask, gunicorn, Django, Celery, the agent loop."""
