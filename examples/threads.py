"""One client shared by many threads, as in a Flask/Django/gunicorn worker: no event loop anywhere.

    python examples/threads.py
"""

import sys
from concurrent.futures import ThreadPoolExecutor

import mcpcall

client = mcpcall.connect([sys.executable, "-m", "mcpcall.demo_server"], timeout=10)


def handle_request(n: int) -> str:
    """What a web view would do: call a tool, block this thread only."""
    return client.call_tool("weather", {"city": f"City {n}"}).text


with client, ThreadPoolExecutor(max_workers=8) as pool:
    for line in pool.map(handle_request, range(16)):
        print(line)
