"""Where a config value came from, and what it becomes: ``${...}`` expansion, ``envFile`` and the shared field checks.

String values may hold ``${VAR}``, ``${VAR:-default}`` (the default also when
VAR is empty, as in a shell), ``${env:VAR}`` (same rules), ``${workspaceFolder}``,
``${workspaceFolderBasename}``, ``${userHome}``, ``${pathSeparator}`` (or ``${/}``)
and ``${input:ID}`` (from the ``inputs=`` argument of :func:`~mcpcall.config.load_config`).
Nested references are not supported. Values read from an ``envFile`` (a dotenv
file) are taken literally.

:class:`_Context` carries what expansion needs and the place (file, server,
field) every :class:`~mcpcall.errors.ConfigError` names, never a value (env
values and headers hold secrets). This module imports nothing of mcpcall but
:mod:`mcpcall.errors`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from typing import Any, NoReturn

from ..errors import ConfigError

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TRUE_WORDS = frozenset({"true", "yes", "1", "on"})
_FALSE_WORDS = frozenset({"false", "no", "0", "off"})


# -- where a value came from, for messages -------------------------------------------------------


class _Context:
    """What expansion needs, and the place (file, server) every message names."""

    def __init__(self, label: str, folder: str | None, workspace: str, inputs: Mapping[str, str],
                 environ: Mapping[str, str], prompts: Mapping[str, str]) -> None:
        self.label = label
        self.folder = folder
        self.workspace = workspace
        self.inputs = inputs
        self.environ = environ
        self.prompts = prompts
        self.server = ""
        #: False for an entry built in Python: its values are taken as they are (see _bare_entry).
        self.expand = True

    def where(self) -> str:
        """``config FILE: server 'NAME'``; for a bare entry (no label) ``server 'NAME'``."""
        parts = [f"config {self.label}"] if self.label else []
        if self.server:
            parts.append(f"server {self.server!r}")
        return ": ".join(parts) or "server entry"

    def fail(self, field: str | None, text: str) -> NoReturn:
        where = self.where()
        if not field:
            raise ConfigError(f"{where}: {text}")
        where += f": field {field!r}"
        raise ConfigError(f"{where}{text}" if text.startswith(":") else f"{where} {text}")

    def resolve(self, path: str) -> str:
        """A path from the file: ``~`` expanded, relative to the config file's folder."""
        path = os.path.expanduser(path)
        if self.folder is not None and not os.path.isabs(path):
            path = os.path.join(self.folder, path)
        return path


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _scalar(value: Any, ctx: _Context, field: str, *, bools: bool) -> str:
    """A string; a number (and, with ``bools``, a bool as true/false) becomes one."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        if bools:
            return "true" if value else "false"
    elif isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        return str(value)
    ctx.fail(field, f"must be a string, not {_type_name(value)}")


# -- ${...} expansion ----------------------------------------------------------------------------


def _expand(text: str, ctx: _Context, field: str) -> str:
    """``text`` with every ``${...}`` replaced; a message names the variable, never a value."""
    if not ctx.expand:
        return text
    out: list[str] = []
    pos = 0
    while True:
        start = text.find("${", pos)
        if start < 0:
            out.append(text[pos:])
            return "".join(out)
        end = text.find("}", start + 2)
        body = text[start + 2 : end] if end >= 0 else ""
        if end < 0 or "${" in body:
            ctx.fail(field, "has a '${' without its '}' (nested references are not supported)")
        out.append(text[pos:start])
        out.append(_variable(body, ctx, field))
        pos = end + 1


def _variable(body: str, ctx: _Context, field: str) -> str:
    if body == "workspaceFolder":
        return ctx.workspace
    if body == "workspaceFolderBasename":
        return os.path.basename(ctx.workspace.rstrip(os.sep)) or ctx.workspace
    if body == "userHome":
        return os.path.expanduser("~")
    if body in ("pathSeparator", "/"):
        return os.sep
    if body.startswith("input:"):
        key = body[len("input:"):]
        if key in ctx.inputs:
            value = ctx.inputs[key]
            if not isinstance(value, str):
                ctx.fail(field, f"uses input {key!r}, and inputs[{key!r}] is a {_type_name(value)}, not a string")
            return value
        prompt = f" ({ctx.prompts[key]})" if key in ctx.prompts else ""
        ctx.fail(field, f"uses input {key!r}{prompt}: pass it with load_config(..., inputs={{{key!r}: ...}})")
    name, sep, default = body.removeprefix("env:").partition(":-")
    if not _VAR_NAME.fullmatch(name):
        if re.match(r"^\w+:", body) and not body.startswith("env:"):
            ctx.fail(field, f"uses ${{{body.split(':', 1)[0]}:...}}, which mcpcall does not support")
        ctx.fail(field, "has ${...} that is not a variable reference (${NAME}, ${NAME:-default}, ${env:NAME})")
    found = ctx.environ.get(name)
    if found:
        return found
    if sep:
        return default
    if found is not None:
        return found
    ctx.fail(field, f"uses variable {name!r}, which is not set (set it, or write ${{{name}:-default}})")


# -- envFile -------------------------------------------------------------------------------------

_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "$": "$"}


def _closing_quote(text: str, quote: str, start: int = 0) -> tuple[int, int]:
    """Where the closing ``quote`` is in ``text`` from ``start`` (-1: not there), and where to go on once text is added.

    A value that goes on over more lines is looked at from where the last look stopped, not from its start
    again (once per line, that was quadratic in the lines of a quote never closed).
    """
    i = start
    while i < len(text):
        if text[i] == "\\" and quote == '"':
            i += 2  # past the end: the escaped character is the line break added next
            continue
        if text[i] == quote:
            return i, i
        i += 1
    return -1, i


def _read_env_file(path: str, ctx: _Context) -> dict[str, str]:
    """A dotenv file: ``KEY=VALUE`` lines, ``export`` prefixes, quotes (multi-line too), ``#`` comments."""
    problem = ""
    try:
        with open(path, encoding="utf-8-sig") as f:
            text = f.read()
    except FileNotFoundError:
        problem = f": the file {path} does not exist"
    except (OSError, UnicodeDecodeError) as exc:  # the ConfigError below is raised outside: no chained excerpt
        problem = f": cannot read {path}: {exc.strerror if isinstance(exc, OSError) else 'it is not UTF-8'}"
    except (ValueError, UnicodeEncodeError):  # a NUL in the path, or a character no file name can hold
        problem = f": {path!r} is not a file name this system can open"
    if problem:
        ctx.fail("envFile", problem)
    values: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        lineno = i
        if not line or line.startswith("#"):
            continue
        if line.startswith(("export ", "export\t")):
            line = line[len("export"):].lstrip()
        key, eq, value = line.partition("=")
        key = key.strip()
        if not eq or not _ENV_NAME.fullmatch(key):  # the line itself is never shown
            ctx.fail("envFile", f": {path} line {lineno}: expected KEY=VALUE")
        value = value.strip()
        if value[:1] in ("'", '"'):
            quote, body = value[0], value[1:]
            end, scanned = _closing_quote(body, quote)
            while end < 0:
                if i >= len(lines):
                    ctx.fail("envFile", f": {path} line {lineno}: the quote opened for {key} is never closed")
                body += "\n" + lines[i]
                i += 1
                end, scanned = _closing_quote(body, quote, scanned)
            rest = body[end + 1 :].strip()
            if rest and not rest.startswith("#"):
                ctx.fail("envFile", f": {path} line {lineno}: text after the closing quote of {key}")
            value = body[:end]
            if quote == '"':
                value = re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), value)
        else:
            value = re.split(r"\s#", value, maxsplit=1)[0].rstrip()
        values[key] = value
    return values


# -- checks every field shares -------------------------------------------------------------------


def _flag(value: Any, ctx: _Context, field: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE_WORDS | _FALSE_WORDS:
        return value.strip().lower() in _TRUE_WORDS
    ctx.fail(field, f"must be true or false, not {_type_name(value)}")


def _workspace(path: str | None) -> str:
    if path is None:
        return os.getcwd()
    folder = os.path.dirname(path)
    if os.path.basename(folder) in (".vscode", ".cursor"):
        return os.path.dirname(folder)
    return folder
