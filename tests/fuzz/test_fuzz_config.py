"""Config files with hostile values: ``mcpServers`` documents, VS Code's JSONC, ``${...}`` references, ``envFile``.

Properties: :func:`load_config` returns servers or raises :class:`ConfigError` (its docstring's one error),
whatever the file holds (not JSON, JSON nested past the parser, integers of thousands of digits, every
field of the wrong type); no message shows an env value or a header. Costs: stripping JSONC, expanding
``${...}`` and reading an ``envFile`` are linear in what they read (counted steps).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mcpcall.config import load_config
from mcpcall.config.expand import _Context, _expand, _read_env_file
from mcpcall.config.reading import _strip_jsonc
from mcpcall.errors import ConfigError

from .cost import assert_linear, steps
from .profiles import fuzz
from .strategies import BIG_INTS, field_values, json_values, keys, long_texts, numbers, shaped, texts

SECRET = "s3cr3t-value"
ENVIRON = {"HOME": "/home/u", "TOKEN": SECRET, "EMPTY": ""}

references = st.sampled_from(["${TOKEN}", "${EMPTY:-d}", "${env:TOKEN}", "${MISSING}", "${input:x}", "${workspaceFolder}",
                              "${", "${a${b}}", "${}", "${ TOKEN }", "${env:}", "${x:y}", "$${TOKEN}", "${/}", "}"])
strings = st.one_of(texts, references, st.lists(st.one_of(texts, references), max_size=4).map("".join), long_texts(20_000))
entries = shaped({
    "command": strings, "args": st.lists(st.one_of(strings, numbers), max_size=4), "env": st.dictionaries(keys, strings),
    "cwd": strings, "url": st.one_of(st.sampled_from(["https://h/mcp", "http://127.0.0.1:1/", "https://h:99999/",
                                                     "https://[x/", "ftp://h/"]), strings),
    "headers": st.dictionaries(st.one_of(st.sampled_from(["Authorization", "X-Key", "a b", "\u00e9"]), keys), strings),
    "type": st.sampled_from(["stdio", "http", "sse", "streamable-http", "auto", "HTTP", "x"]),
    "transport": st.sampled_from(["sse", "http", "stdio"]), "timeout": numbers, "disabled": st.one_of(numbers, texts),
    "oauth": st.one_of(st.booleans(), shaped({"clientId": strings, "clientSecret": strings, "scopes": st.lists(strings),
                                              "callbackPort": st.one_of(numbers, st.sampled_from(["\u00b2", "8080", " 1 ",
                                                                                                 "1" * 5000, "-1"]))})),
    "envFile": st.sampled_from(["missing.env", "", "/"]),
})
documents = st.one_of(
    st.builds(lambda servers: {"mcpServers": servers}, st.dictionaries(st.one_of(st.just("a"), keys), entries, max_size=3)),
    st.builds(lambda servers, inputs: {"servers": servers, "inputs": inputs},
              st.dictionaries(keys, entries, max_size=2), field_values()),
    json_values,
)


def _quiet_load(source: Any, **options: Any) -> None:
    try:
        configs = load_config(source, environ=ENVIRON, **options)
    except ConfigError as exc:
        assert SECRET not in str(exc)
        return
    for name, config in configs.items():
        assert isinstance(name, str) and config.name == name


@fuzz(300)
@given(documents)
@example({"mcpServers": {"a": {"command": "x", "timeout": 10**400}}})  # OverflowError in math.isnan
@example({"mcpServers": {"a": {"url": "https://h/", "oauth": {"callbackPort": "\u00b2"}}}})  # int("²"): ValueError
@example({"mcpServers": {"a": {"url": "https://h/", "oauth": {"callbackPort": "1" * 5000}}}})
@example("\x00")  # a string is a path: open() raised ValueError (embedded null byte)
@example("\ud800")  # and UnicodeEncodeError for a character no file name holds
@example({"mcpServers": {"a": {"command": "0", "envFile": "\ud800"}}})  # the same for an envFile
@example({"mcpServers": {"a": {"command": "0", "envFile": "a\x00b"}}})
def test_a_config_mapping_loads_or_is_a_config_error(document: Any) -> None:
    _quiet_load(document)


# Texts of files: JSON of the documents above, JSONC, and what is no JSON at all.
def _jsonc(document: Any) -> str:
    text = json.dumps(document, indent=1)
    return "// comment\n" + text.replace("\n", " /* c */\n").replace("}", ",}").replace("]", ",]")


file_texts = st.one_of(
    documents.map(json.dumps),
    documents.map(_jsonc),
    st.sampled_from(["[" * 100_000, '{"mcpServers": ' * 50_000, '{"mcpServers": {"a": {"command": "x", "timeout": '
                     + "1" * 5000 + "}}}", "/* never closed", '{"a": "\\ud800"}', "\ufeff{}", "", "NaN", "// only",
                     '{"mcpServers": {"a": {"command": "x", "timeout": 1e999}}}', '{"mcpServers": {"a": 1,}} // x']),
    st.tuples(st.sampled_from(["[", "{", '"', "/*", "//", ",", "]", "}"]), st.integers(0, 20_000)).map(lambda t: t[0] * t[1]),
    texts,
)


@fuzz(200)
@given(file_texts)
@example("[" * 100_000)  # RecursionError out of json.loads
@example('{"mcpServers": {"a": {"command": "x", "timeout": ' + "1" * 5000 + "}}}")  # ValueError: too many digits
def test_a_config_file_loads_or_is_a_config_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    _quiet_load(str(path))


@fuzz(100)
@given(st.binary(max_size=200))
def test_a_config_file_of_any_bytes_loads_or_is_a_config_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "mcp.json"
    path.write_bytes(data)
    _quiet_load(str(path))


env_lines = st.one_of(
    st.sampled_from(["K=v", "export K=v", "K='v'", 'K="a\\nb"', 'K="', "K='", "# c", "", "=v", "K", "K=v # c", 'K="x" y',
                     'K="\\', "export\tK=1", "K-1.a=2", "\u00e9=1"]),
    st.tuples(st.sampled_from(["K=", "K=\"", "K='"]), texts).map("".join),
    texts,
)


@fuzz(150)
@given(st.lists(env_lines, max_size=12).map("\n".join))
def test_an_env_file_is_read_or_is_a_config_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "x.env"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        values = _read_env_file(str(path), _context())
    except ConfigError as exc:
        assert str(path) in str(exc)
        return
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in values.items())


def _context() -> _Context:
    ctx = _Context("mcp.json", None, "/work", {"x": "input"}, ENVIRON, {})
    ctx.server = "s"
    return ctx


# -- costs ------------------------------------------------------------------------------------------------

units = st.text(st.sampled_from('"\\/*,]}{[ \nax'), min_size=1, max_size=6)


@fuzz(30, deadline=None)
@given(units, st.sampled_from(["", "[", '"', "/*", "//"]), st.sampled_from(["", "]", '"', "*/", "\n"]))
def test_stripping_jsonc_is_linear(unit: str, prefix: str, suffix: str) -> None:
    assert_linear(lambda n: steps(_strip_jsonc, prefix + unit * n + suffix), 16, f"JSONC of {prefix!r} + {unit!r} * n")


@fuzz(30, deadline=None)
@given(st.text(st.sampled_from("${}:-aT"), min_size=1, max_size=6))
def test_expanding_references_is_linear(unit: str) -> None:
    def expand(text: str) -> None:
        try:
            _expand(text, _context(), "args[0]")
        except ConfigError:
            pass

    assert_linear(lambda n: steps(expand, "${TOKEN}" + unit * n), 16, f"expanding {unit!r} * n")


@fuzz(25, deadline=None)
@given(st.sampled_from(['K="', "K='", "K=v\n", 'K="a\\', "# c\n", "export K=1\n"]),
       st.text(st.sampled_from("ab\\\"' #=\n"), min_size=1, max_size=6))
@example('K="', "x\n")  # an unclosed quote: the whole value was scanned again for each line added
def test_reading_an_env_file_is_linear(tmp_path: Path, head: str, unit: str) -> None:
    path = tmp_path / "x.env"

    def cost(n: int) -> int:
        path.write_text(head + unit * n)
        return steps(_read_env_file, str(path), _context())

    assert_linear(cost, 16, f"an env file of {head!r} + {unit!r} * n")


@pytest.mark.parametrize("value", BIG_INTS + [float("inf"), float("nan"), -0.0, True], ids=lambda v: f"{v}"[:20])
def test_a_timeout_of_any_number_is_read_or_refused(value: Any) -> None:
    _quiet_load({"mcpServers": {"a": {"command": "x", "timeout": value}}})
