"""Unit tests of mcpcall.types: the typed, frozen views of MCP results, and of task statuses.

Pure: no server, no threads. Every parse_* function is lenient (unknown fields
stay in ``.raw``, optional fields of a wrong type are left out) and strict where
it must be (a missing required field is a ProtocolError naming server and field).
"""

from __future__ import annotations

import base64
import dataclasses
import sys
from typing import Any, Callable

import pytest

import mcpcall
from mcpcall import ProtocolError, SchemaValidationError
from mcpcall.session.tasks import TaskStatus, parse_task_status
from mcpcall.types import (
    AudioContent,
    CallToolResult,
    Completion,
    EmbeddedResource,
    GetPromptResult,
    ImageContent,
    Implementation,
    Prompt,
    PromptArgument,
    PromptMessage,
    ReadResourceResult,
    Resource,
    ResourceContents,
    ResourceLink,
    ResourceTemplate,
    TextContent,
    Tool,
    UnknownContent,
    parse_call_result,
    parse_completion,
    parse_content,
    parse_prompt,
    parse_prompt_result,
    parse_read_result,
    parse_resource,
    parse_resource_contents,
    parse_template,
    parse_tool,
)

pytestmark = pytest.mark.timeout(30)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
PNG_B64 = base64.b64encode(PNG).decode("ascii")
WAV = b"RIFF\x00\x01\x02WAVEfmt " + b"\xff" * 300
WAV_B64 = base64.b64encode(WAV).decode("ascii")


def mime_wrapped(text: str, width: int = 76, newline: str = "\n") -> str:
    """``text`` broken into MIME-style lines."""
    return newline.join(text[i : i + width] for i in range(0, len(text), width)) + newline


def raises_naming(server: str, *fields: str) -> Any:
    """A context manager: a ProtocolError whose message names ``server`` and every one of ``fields``."""

    class _Check:
        def __enter__(self) -> None:
            self._ctx = pytest.raises(ProtocolError)
            self.info = self._ctx.__enter__()

        def __exit__(self, *exc: object) -> bool:
            handled = self._ctx.__exit__(*exc)
            message = str(self.info.value)
            assert repr(server) in message, message
            for name in fields:
                assert repr(name) in message, message
            return bool(handled)

    return _Check()


# -- one sample of every type: (parse, wire dict) ------------------------------------------------

SAMPLES: dict[str, tuple[Callable[[Any], Any], dict[str, Any]]] = {
    "TextContent": (parse_content, {"type": "text", "text": "hi"}),
    "ImageContent": (parse_content, {"type": "image", "data": PNG_B64, "mimeType": "image/png"}),
    "AudioContent": (parse_content, {"type": "audio", "data": WAV_B64, "mimeType": "audio/wav"}),
    "ResourceLink": (parse_content, {"type": "resource_link", "uri": "file:///a", "name": "a"}),
    "EmbeddedResource": (parse_content, {"type": "resource", "resource": {"uri": "file:///a", "text": "x"}}),
    "UnknownContent": (parse_content, {"type": "hologram", "depth": 3}),
    "ResourceContents": (parse_resource_contents, {"uri": "file:///a", "blob": PNG_B64}),
    "Resource": (parse_resource, {"uri": "file:///a", "name": "a"}),
    "ResourceTemplate": (parse_template, {"uriTemplate": "file:///{p}", "name": "files"}),
    "ReadResourceResult": (lambda d: parse_read_result(d, "file:///a"), {"contents": [{"uri": "file:///a", "text": "x"}]}),
    "Prompt": (parse_prompt, {"name": "p", "arguments": [{"name": "x"}]}),
    "PromptArgument": (lambda d: parse_prompt({"name": "p", "arguments": [d]}).arguments[0], {"name": "x"}),
    "PromptMessage": (lambda d: parse_prompt_result({"messages": [d]}, "p").messages[0],
                      {"role": "user", "content": {"type": "text", "text": "hi"}}),
    "GetPromptResult": (lambda d: parse_prompt_result(d, "p"),
                        {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]}),
    "Completion": (parse_completion, {"completion": {"values": ["a", "b"]}}),
    "CallToolResult": (parse_call_result, {"content": [{"type": "text", "text": "hi"}]}),
    "Tool": (parse_tool, {"name": "echo", "inputSchema": {"type": "object"}}),
    "Implementation": (Implementation.from_wire, {"name": "srv", "version": "1.0"}),
}
TYPES = {cls.__name__: cls for cls in (
    TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource, UnknownContent, ResourceContents,
    Resource, ResourceTemplate, ReadResourceResult, Prompt, PromptArgument, PromptMessage, GetPromptResult,
    Completion, CallToolResult, Tool, Implementation)}


def sample(name: str, **extra: Any) -> Any:
    parse, wire = SAMPLES[name]
    return parse({**wire, **extra})


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_sample_parses_to_its_type(name: str) -> None:
    # Guards: each parse_* function returns the documented type for a minimal valid wire dict.
    assert type(sample(name)) is TYPES[name]


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_unknown_fields_are_kept_in_raw(name: str) -> None:
    # Guards: leniency: a field mcpcall does not know is neither an error nor lost (it stays in .raw).
    parsed = sample(name, xFuture={"nested": [1, 2]})
    assert parsed.raw["xFuture"] == {"nested": [1, 2]}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_type_is_frozen(name: str) -> None:
    # Guards: results are immutable: assigning any field (or a new attribute) raises FrozenInstanceError.
    parsed = sample(name)
    first = dataclasses.fields(parsed)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(parsed, first, "changed")
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.raw = {}
    with pytest.raises((dataclasses.FrozenInstanceError, AttributeError, TypeError)):
        parsed.brand_new = 1


@pytest.mark.skipif(sys.version_info < (3, 10), reason="dataclass slots need Python 3.10")
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_type_is_slotted(name: str) -> None:
    # Guards: on 3.10+ the records are slotted (no per-instance __dict__: small, and no stray attributes).
    parsed = sample(name)
    assert not hasattr(parsed, "__dict__")
    assert "__slots__" in vars(TYPES[name])


@pytest.mark.parametrize("name", sorted(set(SAMPLES) - {"UnknownContent"}))
def test_equality_ignores_raw(name: str) -> None:
    # Guards: two results equal in every lifted field compare equal even when their raw dicts differ.
    assert sample(name, xOne=1) == sample(name, xTwo=2)
    hash(sample(name))  # and every record can go in a set or be a dict key (a dict field made hash() raise)


def test_unknown_blocks_compare_by_everything_they_hold() -> None:
    # Guards: all of an unknown block is in .raw, so ignoring it made any two of one type equal.
    assert sample("UnknownContent", xOne=1) != sample("UnknownContent", xTwo=2)
    assert sample("UnknownContent", xOne=1) == sample("UnknownContent", xOne=1)


def test_equality_still_compares_lifted_fields() -> None:
    # Guards: ignoring .raw does not make equality vacuous: a different lifted field makes them unequal.
    assert sample("TextContent") != sample("TextContent", text="other")
    assert sample("Tool") != sample("Tool", description="other")
    assert sample("Resource") != sample("Resource", size=3)
    assert sample("ImageContent") != sample("ImageContent", data=WAV_B64)


# -- content blocks --------------------------------------------------------------------------


def test_text_content_fields() -> None:
    # Guards: a text block lifts text and annotations; .type is the wire type.
    block = parse_content({"type": "text", "text": "hello", "annotations": {"priority": 0.5}})
    assert isinstance(block, TextContent)
    assert (block.type, block.text, dict(block.annotations)) == ("text", "hello", {"priority": 0.5})


def test_annotations_of_wrong_type_are_left_out() -> None:
    # Guards: an optional object of the wrong type (annotations: list) becomes {} instead of an error.
    block = parse_content({"type": "text", "text": "x", "annotations": ["not", "an", "object"]})
    assert dict(block.annotations) == {}
    assert block.raw["annotations"] == ["not", "an", "object"]


@pytest.mark.parametrize("kind, cls, payload, encoded", [
    ("image", ImageContent, PNG, PNG_B64),
    ("audio", AudioContent, WAV, WAV_B64),
])
def test_binary_blocks_are_decoded_to_bytes(kind: str, cls: type, payload: bytes, encoded: str) -> None:
    # Guards: image/audio data arrives as the decoded bytes, with its mime type.
    block = parse_content({"type": kind, "data": encoded, "mimeType": f"{kind}/x"})
    assert isinstance(block, cls)
    assert block.data == payload and isinstance(block.data, bytes)
    assert block.mime_type == f"{kind}/x"
    assert block.type == kind


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_base64_line_breaks_are_tolerated(newline: str) -> None:
    # Guards: MIME-style wrapped base64 (LF or CRLF, spaces) decodes the same as unwrapped.
    wrapped = mime_wrapped(PNG_B64, newline=newline)
    assert parse_content({"type": "image", "data": wrapped, "mimeType": "image/png"}).data == PNG
    assert parse_content({"type": "audio", "data": " " + wrapped, "mimeType": "audio/wav"}).data == PNG
    assert parse_resource_contents({"uri": "u:", "blob": wrapped}).blob == PNG


@pytest.mark.parametrize("bad", ["not base64!!", "aGk", "aGVsbG8=extra", "a-_b"])
def test_invalid_base64_is_a_protocol_error_naming_the_field(bad: str) -> None:
    # Guards: bad base64 is a ProtocolError naming the server and the field (data / blob), never binascii.Error.
    with raises_naming("srv", "data"):
        parse_content({"type": "image", "data": bad, "mimeType": "image/png"}, "srv")
    with raises_naming("srv", "data"):
        parse_content({"type": "audio", "data": bad, "mimeType": "audio/wav"}, "srv")
    with raises_naming("srv", "blob"):
        parse_resource_contents({"uri": "u:", "blob": bad}, "srv")
    with raises_naming("srv", "blob"):
        parse_content({"type": "resource", "resource": {"uri": "u:", "blob": bad}}, "srv")


@pytest.mark.parametrize("block, field", [
    ({"text": "no type"}, "type"),
    ({"type": 7}, "type"),
    ({"type": "text"}, "text"),
    ({"type": "text", "text": 5}, "text"),
    ({"type": "image", "mimeType": "image/png"}, "data"),
    ({"type": "image", "data": PNG_B64}, "mimeType"),
    ({"type": "audio", "data": WAV_B64}, "mimeType"),
    ({"type": "audio", "mimeType": "audio/wav"}, "data"),
    ({"type": "resource_link", "name": "a"}, "uri"),
    ({"type": "resource_link", "uri": "file:///a"}, "name"),
    ({"type": "resource"}, "resource"),
    ({"type": "resource", "resource": "file:///a"}, "resource"),
    ({"type": "resource", "resource": {"text": "x"}}, "uri"),
    ({"type": "resource", "resource": {"uri": "file:///a"}}, "text"),
])
def test_content_required_fields(block: dict[str, Any], field: str) -> None:
    # Guards: a content block missing (or with a wrong-typed) required field names the server and the field.
    with raises_naming("srv", field):
        parse_content(block, "srv")


def test_content_that_is_not_an_object() -> None:
    # Guards: a block that is not a dict is a ProtocolError, not an AttributeError.
    with pytest.raises(ProtocolError, match="srv"):
        parse_content(["text", "hi"], "srv")


def test_error_without_server_name_still_names_the_field() -> None:
    # Guards: the message stays readable when no server name is known.
    with pytest.raises(ProtocolError, match="the server sent .*'text'"):
        parse_content({"type": "text"})


def test_resource_link_fields_and_lenient_optionals() -> None:
    # Guards: a resource_link lifts its optionals; wrong-typed ones (size "10", size True, title 5) are left out.
    link = parse_content({"type": "resource_link", "uri": "file:///a", "name": "a", "title": "A",
                          "description": "the a", "mimeType": "text/plain", "size": 10})
    assert isinstance(link, ResourceLink)
    assert (link.uri, link.name, link.title, link.description, link.mime_type, link.size) == (
        "file:///a", "a", "A", "the a", "text/plain", 10)
    for bad in ({"size": "10"}, {"size": True}, {"size": 1.5}):
        assert parse_content({"type": "resource_link", "uri": "u:", "name": "n", **bad}).size is None
    odd = parse_content({"type": "resource_link", "uri": "u:", "name": "n", "title": 5, "mimeType": [], "description": {}})
    assert (odd.title, odd.mime_type, odd.description) == (None, None, None)
    assert odd.raw["title"] == 5


def test_embedded_resource_text_and_blob() -> None:
    # Guards: an embedded resource holds parsed ResourceContents (text, or blob as bytes).
    text = parse_content({"type": "resource", "resource": {"uri": "file:///a", "mimeType": "text/plain", "text": "é"}})
    assert isinstance(text, EmbeddedResource)
    assert text.resource == ResourceContents("file:///a", "text/plain", "é", None)
    assert text.resource.data == "é".encode()
    blob = parse_content({"type": "resource", "resource": {"uri": "file:///b", "blob": PNG_B64}})
    assert blob.resource.blob == PNG and blob.resource.text is None and blob.resource.data == PNG


def test_unknown_content_keeps_everything() -> None:
    # Guards: a block type from a newer protocol is kept as UnknownContent with its type and the whole dict.
    wire = {"type": "hologram", "depth": 3, "annotations": {"x": 1}}
    block = parse_content(wire)
    assert isinstance(block, UnknownContent)
    assert block.type == "hologram" and block.raw == wire


def test_resource_contents_blob_wins_and_wrong_types() -> None:
    # Guards: blob (decoded) is preferred over text; a non-string blob falls back to text; neither names 'text'.
    both = parse_resource_contents({"uri": "u:", "text": "t", "blob": PNG_B64})
    assert both.blob == PNG and both.text is None
    fallback = parse_resource_contents({"uri": "u:", "text": "t", "blob": 5, "mimeType": 9})
    assert fallback.text == "t" and fallback.blob is None and fallback.mime_type is None
    with raises_naming("srv", "text"):
        parse_resource_contents({"uri": "u:", "blob": 5}, "srv")
    with raises_naming("srv", "uri"):
        parse_resource_contents({"uri": 5, "text": "t"}, "srv")


def test_repr_hides_blobs() -> None:
    # Guards: repr never dumps binary payloads (image/audio data, resource blobs, raw) but stays informative.
    image = parse_content({"type": "image", "data": PNG_B64, "mimeType": "image/png"})
    audio = parse_content({"type": "audio", "data": WAV_B64, "mimeType": "audio/wav"})
    contents = parse_resource_contents({"uri": "file:///b", "blob": PNG_B64})
    embedded = parse_content({"type": "resource", "resource": {"uri": "file:///b", "blob": PNG_B64}})
    result = parse_call_result({"content": [{"type": "image", "data": PNG_B64, "mimeType": "image/png"}]}, "t", "s")
    for obj, shown in ((image, "image/png"), (audio, "audio/wav"), (contents, "file:///b"),
                       (embedded, "file:///b"), (result, "image/png")):
        text = repr(obj)
        assert shown in text, text
        assert PNG_B64[:16] not in text and WAV_B64[:16] not in text, text
        assert "\\x89PNG" not in text and "RIFF" not in text and "\\xff" not in text, text
        assert len(text) < 400, text


# -- resources -------------------------------------------------------------------------------


def test_resource_fields() -> None:
    # Guards: parse_resource lifts every documented field (mimeType -> mime_type).
    r = parse_resource({"uri": "file:///a", "name": "a", "title": "A", "description": "d", "mimeType": "text/plain",
                        "size": 3, "annotations": {"audience": ["user"]}})
    assert r == Resource("file:///a", "a", "A", "d", "text/plain", 3, {"audience": ["user"]})


def test_resource_optional_fields_of_wrong_type_are_left_out() -> None:
    # Guards: wrong-typed optionals of a resource become None/{} and stay in raw.
    r = parse_resource({"uri": "u:", "name": "n", "title": 1, "description": [], "mimeType": {}, "size": "3",
                        "annotations": "x"})
    assert (r.title, r.description, r.mime_type, r.size, dict(r.annotations)) == (None, None, None, None, {})
    assert r.raw["size"] == "3"


@pytest.mark.parametrize("wire, field", [({"name": "a"}, "uri"), ({"uri": "u:"}, "name"), ({"uri": 1, "name": "a"}, "uri")])
def test_resource_required_fields(wire: dict[str, Any], field: str) -> None:
    # Guards: a resource without uri/name is a ProtocolError naming server and field.
    with raises_naming("srv", field):
        parse_resource(wire, "srv")


def test_resource_template_fields_and_required() -> None:
    # Guards: uriTemplate -> uri_template; uriTemplate and name are required.
    t = parse_template({"uriTemplate": "file:///{path}", "name": "files", "mimeType": "text/plain", "title": 3})
    assert (t.uri_template, t.name, t.mime_type, t.title) == ("file:///{path}", "files", "text/plain", None)
    with raises_naming("srv", "uriTemplate"):
        parse_template({"uri": "file:///{path}", "name": "files"}, "srv")
    with raises_naming("srv", "name"):
        parse_template({"uriTemplate": "x"}, "srv")


def test_read_resource_result() -> None:
    # Guards: contents is required; .text joins text contents, .data is the first contents as bytes.
    result = parse_read_result({"contents": [{"uri": "a:", "text": "one"}, {"uri": "b:", "blob": PNG_B64},
                                             {"uri": "c:", "text": "two"}]}, "a:", "srv")
    assert isinstance(result, ReadResourceResult)
    assert result.text == "one\ntwo" and result.data == b"one"
    assert [c.uri for c in result.contents] == ["a:", "b:", "c:"]
    assert parse_read_result({"contents": []}, "a:").data == b""
    with raises_naming("srv", "contents"):
        parse_read_result({}, "a:", "srv")
    with raises_naming("srv", "contents"):
        parse_read_result({"contents": {"uri": "a:"}}, "a:", "srv")
    with raises_naming("srv", "uri"):
        parse_read_result({"contents": [{"text": "x"}]}, "a:", "srv")


# -- prompts and completion ------------------------------------------------------------------


def test_prompt_and_arguments() -> None:
    # Guards: a prompt lifts its arguments (required only when literally true), lenient about wrong types.
    p = parse_prompt({"name": "review", "title": "Review", "description": "d", "arguments": [
        {"name": "code", "description": "the code", "required": True, "title": "Code"},
        {"name": "style", "required": "yes", "description": 4},
    ]})
    assert isinstance(p, Prompt)
    assert (p.name, p.title, p.description) == ("review", "Review", "d")
    assert p.arguments == (PromptArgument("code", "the code", True, "Code"), PromptArgument("style", None, False, None))
    assert isinstance(p.arguments, tuple)
    assert parse_prompt({"name": "p", "arguments": "nope"}).arguments == ()
    assert parse_prompt({"name": "p"}).arguments == ()


def test_prompt_required_fields() -> None:
    # Guards: a prompt without a name, or an argument without one, names server and field.
    with raises_naming("srv", "name"):
        parse_prompt({"description": "no name"}, "srv")
    with raises_naming("srv", "name", "p"):
        parse_prompt({"name": "p", "arguments": [{"description": "no name"}]}, "srv")
    with pytest.raises(ProtocolError, match="srv"):
        parse_prompt({"name": "p", "arguments": ["code"]}, "srv")


def test_get_prompt_result() -> None:
    # Guards: messages (role + typed content) and description are lifted; .text joins the text messages.
    result = parse_prompt_result({"description": "d", "messages": [
        {"role": "user", "content": {"type": "text", "text": "a"}},
        {"role": "assistant", "content": {"type": "image", "data": PNG_B64, "mimeType": "image/png"}},
        {"role": "assistant", "content": {"type": "text", "text": "b"}},
    ]}, "p")
    assert isinstance(result, GetPromptResult)
    assert result.description == "d" and result.text == "a\nb"
    assert [m.role for m in result.messages] == ["user", "assistant", "assistant"]
    assert isinstance(result.messages[0], PromptMessage)
    assert result.messages[1].content.data == PNG
    assert parse_prompt_result({"messages": [], "description": 5}, "p").description is None


@pytest.mark.parametrize("wire, field", [
    ({}, "messages"),
    ({"messages": "hi"}, "messages"),
    ({"messages": [{"content": {"type": "text", "text": "a"}}]}, "role"),
    ({"messages": [{"role": "user"}]}, "content"),
    ({"messages": [{"role": "user", "content": "a"}]}, "content"),
    ({"messages": [{"role": "user", "content": {"type": "text"}}]}, "text"),
])
def test_get_prompt_result_required_fields(wire: dict[str, Any], field: str) -> None:
    # Guards: a malformed prompts/get result names the server, the field and the prompt.
    with raises_naming("srv", field, "review"):
        parse_prompt_result(wire, "review", "srv")


def test_completion() -> None:
    # Guards: values (strings only), total and hasMore are lifted; wrong-typed optionals are left out.
    c = parse_completion({"completion": {"values": ["a", 1, "b", None], "total": 10, "hasMore": True}})
    assert c == Completion(("a", "b"), 10, True)
    lenient = parse_completion({"completion": {"values": [], "total": "10", "hasMore": "true"}})
    assert (lenient.values, lenient.total, lenient.has_more) == ((), None, False)
    assert parse_completion({"completion": {"values": [], "total": True}}).total is None


@pytest.mark.parametrize("wire, field", [({}, "completion"), ({"completion": []}, "completion"),
                                         ({"completion": {}}, "values"), ({"completion": {"values": "a"}}, "values")])
def test_completion_required_fields(wire: dict[str, Any], field: str) -> None:
    # Guards: a completion/complete result without completion.values names server and field.
    with raises_naming("srv", field):
        parse_completion(wire, "srv")


# -- tools -----------------------------------------------------------------------------------


def test_call_tool_result() -> None:
    # Guards: content typed, structuredContent kept, isError only when literally true, tool/server recorded.
    r = parse_call_result({"content": [{"type": "text", "text": "a"}, {"type": "hologram"}, {"type": "text", "text": "b"}],
                           "structuredContent": {"n": 1}, "isError": False}, "echo", "srv")
    assert isinstance(r, CallToolResult)
    assert r.text == "a\nb" and r.structured_content == {"n": 1} and r.is_error is False
    assert (r.tool, r.server) == ("echo", "srv")
    assert isinstance(r.content[1], UnknownContent)
    assert parse_call_result({"isError": "true"}).is_error is False
    assert parse_call_result({}).content == ()
    assert parse_call_result({"structuredContent": {"n": 1}}).text == '{"n": 1}'


def test_call_tool_result_raise_for_error() -> None:
    # Guards: isError: true becomes a ToolError naming tool and server on raise_for_error(); a success returns self.
    r = parse_call_result({"content": [{"type": "text", "text": "boom"}], "isError": True}, "echo", "srv")
    with pytest.raises(mcpcall.ToolError, match="'echo'.*'srv'.*boom") as info:
        r.raise_for_error()
    assert info.value.result is r
    ok = parse_call_result({"content": []}, "echo", "srv")
    assert ok.raise_for_error() is ok


@pytest.mark.parametrize("wire, field", [
    ({"content": "hi"}, "content"),
    ({"content": {"type": "text", "text": "hi"}}, "content"),
    ({"content": [{"type": "text"}]}, "text"),
    ({"content": [{"type": "image", "data": "!!", "mimeType": "image/png"}]}, "data"),
])
def test_call_tool_result_required_fields(wire: dict[str, Any], field: str) -> None:
    # Guards: a malformed tools/call result names the server, the tool and the field.
    with raises_naming("srv", field, "echo"):
        parse_call_result(wire, "echo", "srv")


def test_tool_fields_and_lenient_optionals() -> None:
    # Guards: a tool lifts name, description, schemas, title, annotations; wrong-typed optionals are left out.
    t = parse_tool({"name": "echo", "description": "says it back", "title": "Echo",
                    "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
                    "annotations": {"readOnlyHint": True}})
    assert isinstance(t, Tool)
    assert (t.name, t.description, t.title) == ("echo", "says it back", "Echo")
    assert dict(t.input_schema) == {"type": "object"} and t.output_schema == {"type": "object"}
    assert dict(t.annotations) == {"readOnlyHint": True}
    odd = parse_tool({"name": "x", "description": 5, "title": [], "inputSchema": "object", "outputSchema": [],
                      "annotations": 1})
    assert (odd.description, odd.title, dict(odd.input_schema), odd.output_schema, dict(odd.annotations)) == (
        "", None, {}, None, {})


def test_tool_display_name_order() -> None:
    # Guards: display_name is title, then annotations.title, then name.
    assert parse_tool({"name": "n", "title": "T", "annotations": {"title": "A"}}).display_name == "T"
    assert parse_tool({"name": "n", "annotations": {"title": "A"}}).display_name == "A"
    assert parse_tool({"name": "n", "annotations": {"title": 3}}).display_name == "n"


@pytest.mark.parametrize("wire", [{}, {"name": 5}, {"description": "x"}])
def test_tool_requires_a_name(wire: dict[str, Any]) -> None:
    # Guards: a tool without a string name is a ProtocolError naming server and 'name'.
    with raises_naming("srv", "name"):
        parse_tool(wire, "srv")


def test_tool_that_is_not_an_object() -> None:
    # Guards: a tools/list entry that is not a dict is a ProtocolError, not an AttributeError.
    with pytest.raises(ProtocolError, match="'srv'"):
        parse_tool("echo", "srv")


def test_implementation_from_and_to_wire() -> None:
    # Guards: Implementation is tolerant of missing fields and round-trips unknown fields in to_wire().
    impl = Implementation.from_wire({"name": "srv", "version": "2", "title": "Server", "websiteUrl": "https://x"})
    assert (impl.name, impl.version, impl.title) == ("srv", "2", "Server")
    assert impl.to_wire() == {"name": "srv", "version": "2", "title": "Server", "websiteUrl": "https://x"}
    empty = Implementation.from_wire(None)
    assert (empty.name, empty.version, empty.title) == ("", "", None)
    assert Implementation("a", "1").to_wire() == {"name": "a", "version": "1"}


# -- errors and task statuses ----------------------------------------------------------------


def test_schema_validation_error_hierarchy() -> None:
    # Guards: SchemaValidationError is caught by `except ProtocolError`, `except ValueError` and `except MCPError`.
    assert issubclass(SchemaValidationError, ProtocolError)
    assert issubclass(SchemaValidationError, ValueError)
    assert issubclass(SchemaValidationError, mcpcall.MCPError)
    exc = SchemaValidationError("bad", path="$.a[0]", reason="not a string", tool="t", server="s")
    assert (exc.path, exc.reason, exc.tool, exc.server, str(exc)) == ("$.a[0]", "not a string", "t", "s", "bad")
    for base in (ProtocolError, ValueError):
        with pytest.raises(base):
            raise exc


def test_task_status_2026_names() -> None:
    # Guards: parse_task_status reads the 2026-07-28 field names (ttlMs, pollIntervalMs).
    s = parse_task_status({"taskId": "t1", "status": "working", "ttlMs": 60000, "pollIntervalMs": 250,
                           "statusMessage": "busy", "createdAt": "c", "lastUpdatedAt": "u"})
    assert isinstance(s, TaskStatus)
    assert (s.task_id, s.status, s.ttl_ms, s.poll_interval_ms, s.status_message, s.created_at, s.last_updated_at) == (
        "t1", "working", 60000, 250, "busy", "c", "u")
    assert s.done is False


def test_task_status_2025_names() -> None:
    # Guards: parse_task_status also reads the 2025-11-25 names (ttl, pollInterval); ttl null is None.
    s = parse_task_status({"taskId": "t1", "status": "completed", "ttl": 30000, "pollInterval": 500})
    assert (s.ttl_ms, s.poll_interval_ms, s.done) == (30000, 500, True)
    assert parse_task_status({"taskId": "t", "status": "working", "ttl": None}).ttl_ms is None


def test_task_status_prefers_2026_names_and_is_lenient() -> None:
    # Guards: when both spellings are present the 2026 one wins; wrong-typed values are left out.
    s = parse_task_status({"taskId": "t", "status": "working", "ttlMs": 1, "ttl": 2, "pollIntervalMs": 3, "pollInterval": 4})
    assert (s.ttl_ms, s.poll_interval_ms) == (1, 3)
    odd = parse_task_status({"taskId": "t", "status": "working", "ttlMs": "1", "ttl": 2, "pollIntervalMs": True})
    assert (odd.ttl_ms, odd.poll_interval_ms) == (2, None)


@pytest.mark.parametrize("status, done", [("working", False), ("input_required", False), ("completed", True),
                                          ("failed", True), ("cancelled", True)])
def test_task_status_done(status: str, done: bool) -> None:
    # Guards: TaskStatus.done is true exactly in the terminal statuses.
    assert parse_task_status({"taskId": "t", "status": status}).done is done


@pytest.mark.parametrize("wire, field", [({"status": "working"}, "taskId"), ({"taskId": "t"}, "status"),
                                         ({"taskId": 1, "status": "working"}, "taskId")])
def test_task_status_required_fields(wire: dict[str, Any], field: str) -> None:
    # Guards: a task status without taskId/status is a ProtocolError naming server and field.
    with raises_naming("srv", field):
        parse_task_status(wire, "srv")


def test_task_status_is_frozen_and_ignores_raw() -> None:
    # Guards: TaskStatus is a frozen record like the result types, equal regardless of raw.
    a = parse_task_status({"taskId": "t", "status": "working", "x": 1})
    assert a == parse_task_status({"taskId": "t", "status": "working", "y": 2})
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.status = "completed"  # type: ignore[misc]
