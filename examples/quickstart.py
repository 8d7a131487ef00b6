"""The bundled demo server, start to finish: list, call, progress, many calls at once.

    python examples/quickstart.py
"""

import sys

import mcpcall

with mcpcall.connect([sys.executable, "-m", "mcpcall.demo_server"]) as client:
    print(f"{client.server_info.name} speaks {client.protocol_version} ({client.era} era)")
    for tool in client.list_tools():
        print(f"  {tool.name}: {tool.description}")

    print(client.call_tool("add", {"a": 2, "b": 3}).structured_content)

    def show(progress, total, message):
        print(f"  progress {progress}/{total}: {message}")

    print(client.call_tool("slow", {"seconds": 0.5, "steps": 3}, on_progress=show).text)

    futures = [client.call_tool_future("echo", {"message": f"call {i}"}) for i in range(20)]
    print([f.result().text for f in futures][:3], "...")

    try:
        client.call_tool("slow", {"seconds": 10}, timeout=0.5)
    except mcpcall.RequestTimeout as exc:
        print("timed out, as asked:", exc)
    print("still usable:", client.call_tool("echo", {"message": "yes"}).text)
