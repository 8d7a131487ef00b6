"""The commands that talk to one server: tools, call, info, resources, read, prompts, get-prompt, ping, demo."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Callable

from .. import connect
from ..client import Client
from ..types import AudioContent, CallToolResult, ContentBlock, EmbeddedResource, ImageContent, ResourceLink, TextContent, Tool
from .output import EXIT_OK, EXIT_TOOL_ERROR, Output, say
from .progress import progress_bar
from .targets import demo_command
from .words import UsageError, parse_arguments, parse_prompt_arguments

__all__ = ["COMMANDS_ON_ONE_SERVER", "demo", "ms", "print_tools"]


def ms(seconds: float) -> str:
    """``12.3 ms``."""
    return f"{seconds * 1000:.1f} ms"


def _first_line(text: str | None) -> str:
    text = (text or "").strip()
    return text.splitlines()[0] if text else ""


def _binary(what: str, size: int, mime_type: str | None) -> str:
    return f"[{what}: {size} bytes, {mime_type or 'no MIME type'}; --json shows them in base64]"


def _is_text(block: ContentBlock) -> bool:
    """A block shown as text: text content, or an embedded text resource."""
    return isinstance(block, TextContent) or (isinstance(block, EmbeddedResource) and block.resource.text is not None)


def _block(block: ContentBlock) -> str:
    """A content block as a person reads it: text as is, binary data by its size and type, never base64."""
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, EmbeddedResource):
        contents = block.resource
        if contents.text is not None:
            return contents.text.removesuffix("\n")
        return _binary(f"binary contents of {contents.uri}", len(contents.blob or b""), contents.mime_type)
    if isinstance(block, (ImageContent, AudioContent)):
        return _binary(f"{block.type} content", len(block.data), block.mime_type)
    if isinstance(block, ResourceLink):
        about = ", ".join(x for x in (block.title or block.name, block.mime_type) if x)
        return f"[resource link: {block.uri}{f' ({about})' if about else ''}; mcpcall read SERVER URI reads it]"
    return f"[{block.type} content: {json.dumps(dict(block.raw), ensure_ascii=False)[:200]}]"


def _print_result(result: CallToolResult, out: Output) -> None:
    for block in result.content:
        text = _block(block)
        out.write(text if text.endswith("\n") else text + "\n")  # a text that ends its own line gets no blank one
    # Structured content repeats the text content (the spec asks servers to send both): shown only without it.
    if result.structured_content is not None and not any(_is_text(b) for b in result.content):
        out.write(json.dumps(result.structured_content, indent=2, ensure_ascii=False) + "\n")


def print_tools(tools: Sequence[Tool], out: Output, indent: str = "") -> None:
    """One line per tool: its name and the first line of its description."""
    width = max((len(t.name) for t in tools), default=0)
    for tool in tools:
        out.write(f"{indent}{tool.name.ljust(width)}  {_first_line(tool.description)}".rstrip() + "\n")


def _tools(client: Client, words: Sequence[str], as_json: bool, out: Output) -> int:
    if not _offers(client, "tools", as_json, out):
        return EXIT_OK
    tools = client.list_tools()
    if as_json:
        out.json([dict(t.raw) for t in tools])
    else:
        print_tools(tools, out)
    return EXIT_OK


def _call(client: Client, words: Sequence[str], as_json: bool, out: Output) -> int:
    if not words:
        raise UsageError("call needs a tool name: mcpcall call [SERVER] TOOL [JSON | key=value ...]")
    name, rest = words[0], words[1:]
    tool = None
    if rest and not rest[0].lstrip().startswith("{"):
        tool = next((t for t in client.list_tools() if t.name == name), None)
    arguments = parse_arguments(rest, tool)
    bar = progress_bar(sys.stderr, name)
    started = time.perf_counter()
    try:
        result = client.call_tool(name, arguments, on_progress=bar.update if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()
    elapsed = time.perf_counter() - started
    if as_json:
        out.json(dict(result.raw))
    else:
        _print_result(result, out)
        say(f"({name}: {ms(elapsed)}{', tool reported an error' if result.is_error else ''})\n")
    return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


def _info(client: Client, words: Sequence[str], as_json: bool, out: Output) -> int:
    info = {
        "server": dict(client.server_info.raw) if client.server_info else None,
        "era": client.era,
        "protocolVersion": client.protocol_version,
        "supportedVersions": client.supported_versions,
        "capabilities": client.capabilities,
        "instructions": client.instructions,
    }
    if as_json:
        out.json(info)
        return EXIT_OK
    server = client.server_info
    out.write(f"server:       {server.name} {server.version}\n" if server else "server:       (unnamed)\n")
    out.write(f"protocol:     {client.protocol_version} ({client.era})\n")
    out.write(f"capabilities: {', '.join(sorted(client.capabilities)) or '(none)'}\n")
    if client.instructions:
        out.write(f"instructions: {client.instructions}\n")
    return EXIT_OK


def _offers(client: Client, what: str, as_json: bool, out: Output) -> bool:
    """Whether the server declared capability ``what``; if not, say so on stderr (an empty listing, exit status 0).

    Every listing (tools, resources, prompts) asks this first: a server without the capability has none of
    them, which is an answer, not an error (asked anyway, it would answer -32601).
    """
    if what in client.capabilities:
        return True
    say(f"mcpcall: server {client.name!r} offers no {what}\n")
    if as_json:
        out.json([])
    return False


def _resources(client: Client, words: Sequence[str], as_json: bool, out: Output) -> int:
    if not _offers(client, "resources", as_json, out):
        return EXIT_OK
    resources = client.list_resources()
    if as_json:
        out.json([dict(r.raw) for r in resources])
        return EXIT_OK
    width = max((len(r.uri) for r in resources), default=0)
    for resource in resources:
        about = " - ".join(x for x in (resource.title or resource.name, _first_line(resource.description)) if x)
        out.write(f"{resource.uri.ljust(width)}  {about}".rstrip() + "\n")
    return EXIT_OK


def _read(client: Client, words: Sequence[str], as_json: bool, out: Output) -> int:
    if len(words) != 1:
        raise UsageError(f"read takes one URI: mcpcall read [SERVER] URI; got {' '.join(map(repr, words)) or 'nothing'}")
    result = client.read_resource(words[0])
    if as_json:
        out.json(dict(result.raw))
        return EXIT_OK
    for contents in result.contents:
        if contents.text is not None:
            out.write(contents.text if contents.text.endswith("\n") else contents.text + "\n")
        else:
            out.write(_binary(f"binary contents of {contents.uri}", len(contents.blob or b""), contents.mime_type) + "\n")
    return EXIT_OK


def _prompts(client: Client, words: Sequence[str], as_json: bool, out: Output) -> int:
    if not _offers(client, "prompts", as_json, out):
        return EXIT_OK
    prompts = client.list_prompts()
    if as_json:
        out.json([dict(p.raw) for p in prompts])
        return EXIT_OK
    width = max((len(p.name) for p in prompts), default=0)
    for prompt in prompts:
        arguments = " ".join(f"{a.name}=…" if a.required else f"[{a.name}=…]" for a in prompt.arguments)
        about = _first_line(prompt.description or prompt.title)
        out.write(f"{prompt.name.ljust(width)}  {about}{'  ' + arguments if arguments else ''}".rstrip() + "\n")
    return EXIT_OK


def _get_prompt(client: Client, words: Sequence[str], as_json: bool, out: Output) -> int:
    if not words:
        raise UsageError("get-prompt needs a prompt name: mcpcall get-prompt [SERVER] NAME [JSON | key=value ...]")
    result = client.get_prompt(words[0], parse_prompt_arguments(words[1:]) or None)
    if as_json:
        out.json(dict(result.raw))
        return EXIT_OK
    for message in result.messages:
        out.write(f"[{message.role}]\n{_block(message.content)}\n")
    return EXIT_OK


def _ping(client: Client, words: Sequence[str], as_json: bool, out: Output) -> int:
    started = time.perf_counter()
    client.ping()
    elapsed = time.perf_counter() - started
    if as_json:
        out.json({"server": client.name, "ms": round(elapsed * 1000, 3)})
    else:
        out.write(f"{client.name}: {ms(elapsed)}\n")
    return EXIT_OK


CommandFunction = Callable[[Client, Sequence[str], bool, Output], int]
COMMANDS_ON_ONE_SERVER: dict[str, CommandFunction] = {
    "tools": _tools,
    "call": _call,
    "info": _info,
    "resources": _resources,
    "read": _read,
    "prompts": _prompts,
    "get-prompt": _get_prompt,
    "ping": _ping,
}


def demo(timeout: float, protocol: str, out: Output) -> int:
    """``mcpcall demo``: start the demo server, list, call, show progress and speed."""
    command = demo_command()
    out.write(f"Starting the bundled demo server: {' '.join(command)}\n")
    started = time.perf_counter()
    with connect(command, timeout=timeout, protocol=protocol) as client:
        out.write(f"Connected in {ms(time.perf_counter() - started)}: {client.server_info.name if client.server_info else '?'}, "
                  f"protocol {client.protocol_version} ({client.era} era)\n\n")
        started = time.perf_counter()
        tools = client.list_tools()
        out.write(f"{len(tools)} tools ({ms(time.perf_counter() - started)}):\n")
        for tool in tools:
            out.write(f"  {tool.name:<8} {_first_line(tool.description)}\n")
        out.write("\n")
        for name, arguments in (("echo", {"message": "hello from mcpcall"}), ("add", {"a": 2, "b": 3})):
            started = time.perf_counter()
            result = client.call_tool(name, arguments)
            elapsed = time.perf_counter() - started
            out.write(f"call {name} {json.dumps(arguments)} -> {result.text!r}  ({ms(elapsed)})\n")
        progress: list[str] = []

        def note(p: float, t: float | None, m: str | None) -> None:
            progress.append(f"{p:g}/{t:g}" if t else f"{p:g}")

        started = time.perf_counter()
        result = client.call_tool("slow", {"seconds": 0.3, "steps": 3}, on_progress=note)
        out.write(f"call slow -> {result.text!r} with progress {', '.join(progress)}  ({ms(time.perf_counter() - started)})\n")
        rounds = 200
        started = time.perf_counter()
        for i in range(rounds):
            client.call_tool("add", {"a": i, "b": 1})
        per_call = (time.perf_counter() - started) / rounds
        out.write(f"\n{rounds} sequential calls: {ms(per_call)} per call ({1 / per_call:,.0f} calls/s)\n")
    return EXIT_OK


def check_no_words(command: str, words: Sequence[str]) -> None:
    """UsageError when a command that takes no arguments got some."""
    if words:
        raise UsageError(f"{command} takes no arguments; got {' '.join(map(repr, words))}")

