"""Answering the server's questions (elicitation) in either protocol era.

    python examples/elicitation.py
"""

import sys

import mcpcall


def ask_user(params):
    print("server asks:", params.get("message"))
    return {"action": "accept", "content": {"confirmed": True}}


for era in ("legacy", "modern"):
    with mcpcall.connect(
        [sys.executable, "-m", "mcpcall.demo_server"], protocol=era, handlers={"elicitation/create": ask_user}
    ) as client:
        print(era, "->", client.call_tool("confirm", {"question": "Deploy to production?"}).text)
