"""What mcpcall.integrations adds per call, and mcpcall against mcpadapt for the frameworks both serve.

One process, pinned to one CPU (the demo servers it starts inherit the pin). Every variant calls the demo
server's ``echo`` tool over stdio through one framework's own sync entry point (``tool.invoke(dict)``,
``tool(**kw)``, ``tool.run(**kw)``, …; the async-only ones through one event loop); the bare variant is
``client.call_tool``. Rounds are interleaved (bare, each framework, each mcpadapt variant, bare, …) and the
best round of each is kept, so a busy machine moves all of them alike; only the ratios of one run count.

It also reports, for mcpadapt's frameworks (smolagents, CrewAI, LangChain), the start-up time (a server
started and its tools adapted, median of 5), and whether the sync tool works when called from inside a
running event loop and from a Jupyter kernel (nbclient and ipykernel, when installed).

    python benchmarks/bench_integrations.py [--calls 300] [--rounds 5] [--cpu 0] [--no-mcpadapt] [--no-notebook]

Run it in the venv that has the frameworks (``make bench-integrations`` uses .venv-int).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any, Callable

import mcpcall

DEMO = [sys.executable, "-m", "mcpcall.demo_server"]
ARGS = {"message": "hi"}

# How each framework's tool is called on its sync path: (module, invoke). The async-only ones take a loop.
SYNC: dict[str, Callable[[Any], Any]] = {
    "langchain": lambda tool: tool.invoke(ARGS),
    "smolagents": lambda tool: tool(**ARGS),
    "crewai": lambda tool: tool.run(**ARGS),
    "llamaindex": lambda tool: tool.call(**ARGS),
    "haystack": lambda tool: tool.invoke(**ARGS),
    "dspy": lambda tool: tool(**ARGS),
}


def _openai_agents_call(tool: Any) -> Any:
    from agents.tool_context import ToolContext

    ctx = ToolContext(context=None, tool_name=tool.name, tool_call_id="bench", tool_arguments=json.dumps(ARGS))
    return tool.on_invoke_tool(ctx, json.dumps(ARGS))


class _RunContext:
    """What a Pydantic AI tool function is handed by a run, as far as mcpcall's uses it: ``emit`` for progress."""

    async def emit(self, event: Any) -> None:
        pass


def _pydantic_ai_call(tool: Any) -> Any:
    return tool.function(_RunContext(), **ARGS)


ASYNC: dict[str, Callable[[Any], Any]] = {"openai_agents": _openai_agents_call, "pydantic_ai": _pydantic_ai_call}


class Variant:
    """One way of calling ``echo``: ``run(n)`` makes n calls and returns the seconds they took."""

    def __init__(self, label: str, run: Callable[[int], float], close: Callable[[], None]) -> None:
        self.label = label
        self.run = run
        self.close = close
        self.best = float("inf")


def _timed(call: Callable[[], Any]) -> Callable[[int], float]:
    def run(n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            call()
        return time.perf_counter() - started

    return run


def _timed_async(make: Callable[[], Any]) -> Callable[[int], float]:
    def run(n: int) -> float:
        async def calls() -> float:
            started = time.perf_counter()
            for _ in range(n):
                result = make()
                if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                    await result
            return time.perf_counter() - started

        return asyncio.run(calls())

    return run


def _name(tool: Any) -> str:
    """A framework tool's name (LlamaIndex keeps it in ``metadata``)."""
    name = getattr(tool, "name", None)
    return str(name if name is not None else getattr(getattr(tool, "metadata", None), "name", tool))


def _echo_tool(tools: list[Any]) -> Any:
    for tool in tools:
        if _name(tool) == "echo":
            return tool
    raise LookupError("no echo tool among " + ", ".join(_name(t) for t in tools))


def mcpcall_variants() -> list[Variant]:
    out = []
    client = mcpcall.connect(DEMO, name="demo")
    out.append(Variant("bare call_tool", _timed(lambda: client.call_tool("echo", ARGS)), client.close))
    for name in [*SYNC, *ASYNC]:
        try:
            module = importlib.import_module(f"mcpcall.integrations.{name}")
        except ImportError as exc:
            print(f"  ({name}: not installed: {exc})")
            continue
        own = mcpcall.connect(DEMO, name="demo")
        tool = _echo_tool(module.tools(own, timeout=30))
        if name in SYNC:
            run = _timed(lambda tool=tool, name=name: SYNC[name](tool))
        else:
            run = _timed_async(lambda tool=tool, name=name: ASYNC[name](tool))
        out.append(Variant(f"mcpcall {name}", run, own.close))
    return out


def mcpadapt_variants() -> list[Variant]:
    try:
        from mcp import StdioServerParameters
        from mcpadapt.core import MCPAdapt
    except ImportError as exc:
        print(f"  (mcpadapt: not installed: {exc})")
        return []
    out = []
    for name, adapter, call in _mcpadapt_adapters():
        params = StdioServerParameters(command=DEMO[0], args=DEMO[1:], env=dict(os.environ))
        adapt = MCPAdapt(params, adapter())
        tools = adapt.__enter__()
        tool = _echo_tool(tools)
        out.append(Variant(f"mcpadapt {name}", _timed(lambda tool=tool, call=call: call(tool)),
                           lambda adapt=adapt: adapt.__exit__(None, None, None)))
    return out


def _mcpadapt_adapters() -> list[tuple[str, Any, Callable[[Any], Any]]]:
    found = []
    for name, module, cls in (("smolagents", "mcpadapt.smolagents_adapter", "SmolAgentsAdapter"),
                              ("crewai", "mcpadapt.crewai_adapter", "CrewAIAdapter"),
                              ("langchain", "mcpadapt.langchain_adapter", "LangChainAdapter")):
        try:
            found.append((name, getattr(importlib.import_module(module), cls), SYNC[name]))
        except ImportError as exc:
            print(f"  (mcpadapt {name}: {exc})")
    return found


# ---------------------------------------------------------------- start-up, a running loop, a notebook


def startup(name: str, adapter: Any | None) -> float:
    """Median seconds of 5: start the demo server and adapt its tools (mcpcall when ``adapter`` is None)."""
    times = []
    for _ in range(5):
        started = time.perf_counter()
        if adapter is None:
            client = mcpcall.connect(DEMO, name="demo")
            importlib.import_module(f"mcpcall.integrations.{name}").tools(client, timeout=30)
            times.append(time.perf_counter() - started)
            client.close()
        else:
            from mcp import StdioServerParameters
            from mcpadapt.core import MCPAdapt

            adapt = MCPAdapt(StdioServerParameters(command=DEMO[0], args=DEMO[1:], env=dict(os.environ)), adapter())
            adapt.__enter__()
            times.append(time.perf_counter() - started)
            adapt.__exit__(None, None, None)
    return statistics.median(times)


# What runs in a running loop and in a notebook: the tools made and called there, then closed.
_SNIPPET = {
    "mcpcall": textwrap.dedent("""
        import sys, mcpcall, importlib
        client = mcpcall.connect([sys.executable, "-m", "mcpcall.demo_server"], name="demo")
        tool = [t for t in importlib.import_module("mcpcall.integrations.{name}").tools(client, timeout=30)
                if getattr(t, "name", None) == "echo"][0]
        print("RESULT", repr(str({call})))
        client.close()
    """),
    "mcpadapt": textwrap.dedent("""
        import sys, os, importlib
        from mcp import StdioServerParameters
        from mcpadapt.core import MCPAdapt
        adapter = getattr(importlib.import_module("{module}"), "{cls}")
        with MCPAdapt(StdioServerParameters(command=sys.executable, args=["-m", "mcpcall.demo_server"],
                                            env=dict(os.environ)), adapter()) as tools:
            tool = [t for t in tools if t.name == "echo"][0]
            print("RESULT", repr(str({call})))
    """),
}
_CALLS = {"smolagents": "tool(message='hi')", "crewai": "tool.run(message='hi')",
          "langchain": "tool.invoke({'message': 'hi'})"}
_MODULES = {"smolagents": ("mcpadapt.smolagents_adapter", "SmolAgentsAdapter"),
            "crewai": ("mcpadapt.crewai_adapter", "CrewAIAdapter"),
            "langchain": ("mcpadapt.langchain_adapter", "LangChainAdapter")}


def _snippet(kind: str, name: str) -> str:
    module, cls = _MODULES[name]
    return _SNIPPET[kind].format(name=name, call=_CALLS[name], module=module, cls=cls)


def in_running_loop(kind: str, name: str) -> str:
    """Run the snippet inside a coroutine (a running loop on the thread), in a child process; what happened."""
    code = "import asyncio\nasync def main():\n" + textwrap.indent(_snippet(kind, name), "    ") + "\nasyncio.run(main())\n"
    return _outcome(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120))


def in_notebook(kind: str, name: str) -> str:
    """Run the snippet as a cell in a Jupyter kernel (nbclient); what happened."""
    try:
        import nbformat
        from nbclient import NotebookClient
    except ImportError:
        return "not run (nbclient not installed)"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(_snippet(kind, name))])
    try:
        NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    except Exception as exc:  # noqa: BLE001 - the outcome is what is reported
        return "fails: " + " ".join(str(exc).split())[-160:]
    text = "".join(out.get("text", "") for out in notebook.cells[0].outputs)
    return "works" if "RESULT 'hi'" in text else "fails: " + " ".join(text.split())[-160:]


def _outcome(done: subprocess.CompletedProcess[str]) -> str:
    if done.returncode == 0 and "RESULT 'hi'" in done.stdout:
        return "works"
    last = (done.stderr.strip().splitlines() or [done.stdout.strip() or f"exit {done.returncode}"])[-1]
    return "fails: " + last[:160]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per round and variant")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cpu", type=int, default=0, help="the CPU to pin to")
    parser.add_argument("--no-mcpadapt", action="store_true")
    parser.add_argument("--no-notebook", action="store_true")
    opts = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {opts.cpu})
    print(f"mcpcall {mcpcall.__version__}, Python {sys.version.split()[0]}, pinned to CPU {opts.cpu}; "
          f"{opts.rounds} rounds x {opts.calls} calls of the demo's echo over stdio")
    variants = mcpcall_variants() + ([] if opts.no_mcpadapt else mcpadapt_variants())
    try:
        for variant in variants:  # warm up: imports, first listings, caches
            variant.run(max(opts.calls // 10, 5))
        for _ in range(opts.rounds):
            for variant in variants:
                variant.best = min(variant.best, variant.run(opts.calls))
    finally:
        for variant in variants:
            variant.close()
    bare = variants[0].best / opts.calls
    print(f"\n{'variant':28} {'us/call':>9} {'calls/s':>9} {'x bare':>7} {'added us':>9}")
    for variant in variants:
        per = variant.best / opts.calls
        print(f"{variant.label:28} {per * 1e6:9.1f} {1 / per:9.0f} {per / bare:7.2f} {(per - bare) * 1e6:9.1f}")
    if opts.no_mcpadapt:
        return
    print(f"\n{'framework':12} {'client':9} {'start-up s':>10}  {'in a running loop':28} notebook")
    for name, adapter, _ in _mcpadapt_adapters():
        try:
            importlib.import_module(f"mcpcall.integrations.{name}")
        except ImportError:
            continue
        for kind, adapt in (("mcpcall", None), ("mcpadapt", adapter)):
            notebook = "not run" if opts.no_notebook else in_notebook(kind, name)
            print(f"{name:12} {kind:9} {startup(name, adapt):10.3f}  {in_running_loop(kind, name):28} {notebook}")


if __name__ == "__main__":
    main()
