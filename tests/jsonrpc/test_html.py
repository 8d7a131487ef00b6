"""Jupyter's rich display of tools, results and content: escaped, bounded, no script-capable media inline."""

from __future__ import annotations

import base64
from typing import Any

import mcpcall
from mcpcall.registry import RegisteredTool
from mcpcall.types import (
    ImageContent,
    ToolList,
    parse_call_result,
    parse_content,
    parse_prompt,
    parse_resource,
    parse_tool,
)
from mcpcall.types.html import MAX_BLOCKS, MAX_INLINE_BYTES, MAX_ROWS, MAX_TEXT, parameters

from ..conftest import demo_argv

EVIL = '<script>alert("x")</script>'
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def _block(**fields: Any) -> Any:
    return parse_content(fields)


def _image(mime: str, data: bytes = PNG) -> dict[str, Any]:
    return {"type": "image", "mimeType": mime, "data": base64.b64encode(data).decode()}


def test_text_is_escaped_and_cut() -> None:
    html = _block(type="text", text=EVIL)._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    long = _block(type="text", text="a" * (MAX_TEXT + 10))._repr_html_()
    assert "a" * MAX_TEXT in long and "a" * (MAX_TEXT + 1) not in long and "10 more characters" in long


def test_images_inline_only_when_safe_and_small() -> None:
    for mime in ("image/png", "image/jpeg", "image/gif", "image/webp", "IMAGE/PNG"):
        html = parse_content(_image(mime))._repr_html_()
        assert f'<img src="data:{mime.lower()};base64,{base64.b64encode(PNG).decode()}"' in html
    svg = parse_content(_image("image/svg+xml", b"<svg onload='alert(1)'/>"))._repr_html_()
    assert "<img" not in svg and "data:" not in svg and "not shown inline" in svg and "onload" not in svg
    sneaky = parse_content(_image('image/png" onerror="alert(1)'))._repr_html_()
    assert "<img" not in sneaky and 'onerror="' not in sneaky and "&quot;" in sneaky
    big = parse_content(_image("image/png", b"x" * (MAX_INLINE_BYTES + 1)))._repr_html_()
    assert "<img" not in big and "not shown inline" in big and "2.0 MiB" in big


def test_the_inline_limits_set_on_html_apply_to_every_view(monkeypatch: Any) -> None:
    """MAX_INLINE_BYTES and INLINE_IMAGE_TYPES of mcpcall.types.html are the ones every view reads, set there."""
    import mcpcall.types.html as html

    image = ImageContent(data=PNG * 10, mime_type="image/png")
    assert "<img" in image._repr_html_()
    monkeypatch.setattr(html, "MAX_INLINE_BYTES", len(PNG))
    assert "<img" not in image._repr_html_() and "not shown inline" in image._repr_html_()
    monkeypatch.undo()
    monkeypatch.setattr(html, "INLINE_IMAGE_TYPES", frozenset())
    assert "<img" not in image._repr_html_() and "this type is not shown inline" in image._repr_html_()
    monkeypatch.undo()
    assert "<img" in image._repr_html_() and html.MAX_INLINE_BYTES == MAX_INLINE_BYTES


def test_audio_plays_inline() -> None:
    wav = base64.b64encode(b"RIFF0000WAVE").decode()
    html = _block(type="audio", mimeType="audio/wav", data=wav)._repr_html_()
    assert f'<audio controls src="data:audio/wav;base64,{wav}"></audio>' in html
    odd = _block(type="audio", mimeType="audio/x<y", data=wav)._repr_html_()
    assert "<audio" not in odd and "audio/x&lt;y" in odd


def test_links_resources_and_unknown_blocks() -> None:
    link = _block(type="resource_link", uri="https://example.com/a?b=1&c=2", name="doc", mimeType="text/plain", size=2048)
    html = link._repr_html_()
    assert '<a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer">doc</a>' in html
    assert "2.0 KiB" in html
    script = _block(type="resource_link", uri="javascript:alert(1)", name=EVIL)._repr_html_()
    assert "href" not in script and "<script>" not in script and "<code>javascript:alert(1)</code>" in script
    text = _block(type="resource", resource={"uri": "file:///x.txt", "mimeType": "text/plain", "text": EVIL})._repr_html_()
    assert "<script>" not in text and "&lt;script&gt;" in text and "file:///x.txt" in text
    blob = _block(type="resource", resource={"uri": "file:///x.bin", "blob": base64.b64encode(b"12345").decode()})
    assert "5 bytes of binary data" in blob._repr_html_()
    unknown = _block(type="hologram", payload=EVIL)._repr_html_()
    assert "hologram" in unknown and "<script>" not in unknown


def test_call_result() -> None:
    result = parse_call_result({"content": [{"type": "text", "text": "boom"}], "isError": True,
                                "structuredContent": {"k": EVIL}}, "t<1>", "s&1")
    html = result._repr_html_()
    assert "<code>t&lt;1&gt;</code>" in html and "s&amp;1" in html and ">error<" in html
    assert "boom" in html and "<script>" not in html and "&quot;k&quot;" in html
    many = parse_call_result({"content": [{"type": "text", "text": str(i)} for i in range(MAX_BLOCKS + 5)]})
    shown = many._repr_html_()
    assert f">{MAX_BLOCKS - 1}</pre>" in shown and f">{MAX_BLOCKS}</pre>" not in shown and "5 more blocks" in shown
    assert "(no content)" in parse_call_result({"content": []})._repr_html_()


TOOL = {
    "name": "search",
    "title": "Search <things>",
    "description": EVIL,
    "inputSchema": {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "what"}, "limit": {"type": ["integer", "null"]},
                       "mode": {"enum": ["a", "b"]}},
        "required": ["query"],
    },
}


def test_tool_and_its_parameters() -> None:
    tool = parse_tool(TOOL)
    assert parameters(tool.input_schema) == [("query", "string", True, "what"), ("limit", "integer | null", False, ""),
                                             ("mode", "enum", False, "")]
    html = tool._repr_html_()
    assert "<b>Search &lt;things&gt;</b>" in html and "<script>" not in html
    assert '<code>query</code> <small>string</small> <b title="required">*</b> — what' in html
    assert '<code>limit</code> <small>integer | null</small><br>' in html


def test_tool_list_is_a_list_shown_as_a_table() -> None:
    tools = ToolList([parse_tool(TOOL), parse_tool({"name": "plain"})])
    assert isinstance(tools, list) and tools == [parse_tool(TOOL), parse_tool({"name": "plain"})]
    html = tools._repr_html_()
    assert html.startswith('<table class="mcpcall-tools"') and "2 tools" in html and "<th" in html
    assert "<code>plain</code>" in html and "<i>none</i>" in html and "<script>" not in html
    registered = ToolList([RegisteredTool("mcp__s__search", "s<1>", parse_tool(TOOL))])
    table = registered._repr_html_()
    assert ">server<" in table and "s&lt;1&gt;" in table and "<code>mcp__s__search</code>" in table
    huge = ToolList(parse_tool({"name": f"t{i}"}) for i in range(MAX_ROWS + 3))._repr_html_()
    assert huge.count("<tr>") == MAX_ROWS + 2 and "3 more tools" in huge  # header, rows, the note


def test_prompt_and_resource() -> None:
    prompt = parse_prompt({"name": "p", "title": "T", "description": EVIL,
                           "arguments": [{"name": "x", "required": True, "description": "an x"}, {"name": "y"}]})
    html = prompt._repr_html_()
    assert '<li><code>x</code> <b title="required">*</b> — an x</li><li><code>y</code></li>' in html
    assert "<script>" not in html
    resource = parse_resource({"uri": "https://e.com/r", "name": "r", "mimeType": "text/csv", "size": 10})
    assert 'href="https://e.com/r"' in resource._repr_html_() and "10 bytes" in resource._repr_html_()


def test_list_tools_and_registry_tools_return_tool_lists() -> None:
    with mcpcall.connect(demo_argv(), name="demo") as client:
        tools = client.list_tools()
        again = client.list_tools()  # the second listing may take another path (cache)
        assert type(tools) is ToolList and type(again) is ToolList and tools == again
        assert "<code>echo</code>" in tools._repr_html_()
    with mcpcall.ToolRegistry({"demo": demo_argv()}) as registry:
        listed = registry.tools()
        assert type(listed) is ToolList and "mcp__demo__add" in listed._repr_html_()
