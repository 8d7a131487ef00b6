"""A server's questions (elicitation): asked at a terminal, declined elsewhere.

:class:`Asker` is the ``elicitation=`` handler the command line gives every
client. When stdin is a terminal it shows the server's message on stderr and
asks: answer (accept, then one line per field of the form), decline, or
cancel; each field as its ``requestedSchema`` says (string, number, integer,
boolean, a choice of values, several of them), required ones insisted on,
defaults taken on an empty line. A URL-mode request shows the address to open.
When stdin is no terminal the request is declined, and a line on stderr says
so.

It runs on the client's callbacks thread (handlers are user code), inside
:func:`~.progress.screen`, so a progress bar or the server's stderr lines do
not write across the prompt. The terminal is read with ``select`` so that the
prompt ends when the command does (:meth:`Asker.stop`: a timeout, an error).
End of input (Ctrl-D) cancels the request; so does Ctrl-C while a question is
shown (:meth:`Asker.ctrl_c` turns it into a cancel for that question; at
any other moment it stops the command, as always).
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any, TextIO

from .output import printable
from .progress import screen

__all__ = ["Asker"]

_POLL = 0.1  # seconds between two looks at stop() / Ctrl-C while waiting for a line
_YES = ("y", "yes", "true", "1", "on")
_NO = ("n", "no", "false", "0", "off")


class _Cancelled(Exception):
    """The person cancelled (Ctrl-D, Ctrl-C), or the command is ending."""


class Asker:
    """The command line's elicitation handler for one server (callable: ``params -> result``)."""

    def __init__(self, server: str, stdin: TextIO | None = None, stream: TextIO | None = None) -> None:
        self.server = server
        self._stdin = sys.stdin if stdin is None else stdin
        self._out = sys.stderr if stream is None else stream
        self._stopped = threading.Event()
        self._interrupted = threading.Event()
        self._asking = threading.Event()
        self._fd = _terminal_fd(self._stdin)

    @property
    def interactive(self) -> bool:
        """Whether questions are asked (stdin is a terminal)."""
        return self._fd is not None

    def stop(self) -> None:
        """The command is ending: a question shown now is cancelled, and no new one is asked (idempotent)."""
        self._stopped.set()

    @contextlib.contextmanager
    def ctrl_c(self) -> Iterator[None]:
        """While inside: Ctrl-C during a question cancels that question (main thread only; elsewhere a no-op)."""
        if not self.interactive or threading.current_thread() is not threading.main_thread():
            yield
            return

        def on_sigint(signum: int, frame: Any) -> None:
            if self._asking.is_set():
                self._interrupted.set()
                return
            signal.default_int_handler(signum, frame)

        try:
            previous = signal.signal(signal.SIGINT, on_sigint)
        except (ValueError, OSError):  # no signals here (an embedded interpreter)
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    # -- the handler ---------------------------------------------------------------------------

    def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        message = printable(str(params.get("message") or "")).strip()
        url = params.get("url") if params.get("mode") == "url" else None
        with screen():
            if not self.interactive or self._stopped.is_set():
                what = f" ({message[:200]!r})" if message else ""
                self._write(f"mcpcall: server {printable(self.server)!r} asked for input{what}; declined: stdin is not a "
                            "terminal (run the command at a terminal to answer)\n")
                return {"action": "decline"}
            self._interrupted.clear()
            self._asking.set()
            try:
                return self._ask(message, url, params.get("requestedSchema"))
            except _Cancelled:
                self._write("\n(cancelled)\n")
                return {"action": "cancel"}
            finally:
                self._asking.clear()

    def _ask(self, message: str, url: Any, schema: Any) -> dict[str, Any]:
        self._write(f"\nmcpcall: server {printable(self.server)!r} asks:\n  {message.replace(chr(10), chr(10) + '  ')}\n")
        if isinstance(url, str):
            self._write(f"  It asks you to open this address: {printable(url)}\n")
            choice = self._choice("Open it and go on? [y]es, [n]o (decline), [c]ancel: ")
            return {"action": choice}
        choice = self._choice("Answer? [y]es, [n]o (decline), [c]ancel: ")
        if choice != "accept":
            return {"action": choice}
        props = schema.get("properties") if isinstance(schema, Mapping) else None
        required = schema.get("required") if isinstance(schema, Mapping) else None
        required = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
        content: dict[str, Any] = {}
        for name, prop in (props or {}).items():
            if isinstance(name, str):
                value = self._field(name, prop if isinstance(prop, Mapping) else {}, name in required)
                if value is not _LEFT_OUT:
                    content[name] = value
        return {"action": "accept", "content": content}

    def _choice(self, prompt: str) -> str:
        while True:
            answer = self._line(prompt).strip().lower()
            if answer in ("y", "yes", "a", "accept"):
                return "accept"
            if answer in ("n", "no", "d", "decline"):
                return "decline"
            if answer in ("c", "cancel"):
                return "cancel"
            self._write("  type y, n or c\n")

    def _field(self, name: str, prop: Mapping[str, Any], required: bool) -> Any:
        choices = _choices(prop)
        many = _choices(prop.get("items")) if prop.get("type") == "array" and isinstance(prop.get("items"), Mapping) else None
        kind = str(prop["type"]) if isinstance(prop.get("type"), str) else "string"
        about = [kind if many is None else "several of"]
        if required:
            about.append("required")
        described = prop.get("title") or prop.get("description")
        if isinstance(described, str) and described.strip():
            about.append(described.strip())
        for values in (choices, many):
            for i, (value, label) in enumerate(values or [], 1):
                self._write(f"    {i}) {printable(label)}\n")
        has_default = "default" in prop
        hint = ""
        if kind == "boolean":
            hint = " [y/n]"
        elif many is not None:
            hint = " (numbers or values, comma-separated)"
        if has_default:
            hint += f" (default: {printable(_shown(prop['default']))})"
        prompt = f"  {printable(name)} ({printable(', '.join(about))}){hint}: "
        while True:
            text = self._line(prompt).strip()
            if not text:
                if has_default:
                    return prop["default"]
                if not required:
                    return _LEFT_OUT
                self._write("  this field is required\n")
                continue
            try:
                return _value(text, kind, prop, choices, many)
            except ValueError as exc:
                self._write(f"  {exc}\n")

    # -- the terminal --------------------------------------------------------------------------

    def _write(self, text: str) -> None:
        with contextlib.suppress(Exception):  # a closed stderr: the answers still work
            self._out.write(text)
            self._out.flush()

    def _line(self, prompt: str) -> str:
        """One line typed at the terminal; :class:`_Cancelled` on end of input, Ctrl-C or stop()."""
        self._write(prompt)
        fd = self._fd
        assert fd is not None
        data = b""
        while True:
            if self._stopped.is_set() or self._interrupted.is_set():
                raise _Cancelled
            try:
                ready, _, _ = select.select([fd], [], [], _POLL)
            except (OSError, ValueError) as exc:
                raise _Cancelled from exc
            if not ready:
                continue
            try:
                chunk = os.read(fd, 4096)
            except OSError as exc:
                raise _Cancelled from exc
            if not chunk and not data:
                raise _Cancelled  # Ctrl-D on an empty line
            data += chunk
            if not chunk or b"\n" in data:
                return data.split(b"\n", 1)[0].decode("utf-8", "replace").rstrip("\r")


_LEFT_OUT = object()


def _terminal_fd(stdin: TextIO) -> int | None:
    try:
        return stdin.fileno() if stdin.isatty() else None
    except (AttributeError, ValueError, OSError):
        return None


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def _choices(prop: Any) -> list[tuple[Any, str]] | None:
    """A field's choices as (value, label): ``enum`` (with legacy ``enumNames``), or ``oneOf``/``anyOf`` of ``const``."""
    if not isinstance(prop, Mapping):
        return None
    if isinstance(prop.get("enum"), list):
        names = prop.get("enumNames")
        names = names if isinstance(names, list) and len(names) == len(prop["enum"]) else None
        return [(v, str(names[i]) if names else str(v)) for i, v in enumerate(prop["enum"])]
    for key in ("oneOf", "anyOf"):
        options = prop.get(key)
        if isinstance(options, list) and options and all(isinstance(o, Mapping) and "const" in o for o in options):
            return [(o["const"], f"{o.get('title') or o['const']}" + (f" ({o['const']})" if o.get("title") else ""))
                    for o in options]
    return None


def _pick(text: str, choices: list[tuple[Any, str]]) -> Any:
    if text.isdigit() and 1 <= int(text) <= len(choices):
        return choices[int(text) - 1][0]
    for value, label in choices:
        if text in (str(value), label):
            return value
    raise ValueError(f"pick one of 1-{len(choices)} (or type the value)")


def _value(text: str, kind: str, prop: Mapping[str, Any], choices: list[tuple[Any, str]] | None,
           many: list[tuple[Any, str]] | None) -> Any:
    """A typed line as the field's value; ValueError says what to type instead."""
    if many is not None:
        picked = [_pick(part.strip(), many) for part in text.split(",") if part.strip()]
        for key, word, bad in (("minItems", "at least", len(picked) < _int(prop.get("minItems"), 0)),
                               ("maxItems", "at most", len(picked) > _int(prop.get("maxItems"), len(many)))):
            if bad:
                raise ValueError(f"pick {word} {printable(str(prop[key]))}")
        return picked
    if choices is not None:
        return _pick(text, choices)
    if kind == "boolean":
        if text.lower() in _YES:
            return True
        if text.lower() in _NO:
            return False
        raise ValueError("type y or n")
    if kind in ("number", "integer"):
        try:
            number: float = int(text) if kind == "integer" else float(text)
        except ValueError:
            raise ValueError(f"type {'a whole number' if kind == 'integer' else 'a number'}") from None
        if not math.isfinite(number):
            raise ValueError("type a finite number")
        if kind == "number" and number.is_integer() and "." not in text and "e" not in text.lower():
            number = int(number)
        low, high = prop.get("minimum"), prop.get("maximum")
        if isinstance(low, (int, float)) and number < low or isinstance(high, (int, float)) and number > high:
            raise ValueError(f"type a number from {low if low is not None else '-inf'} to {high if high is not None else 'inf'}")
        return number
    low, high = _int(prop.get("minLength"), 0), _int(prop.get("maxLength"), -1)
    if len(text) < low or 0 <= high < len(text):
        raise ValueError(f"type {low} to {high if high >= 0 else 'any number of'} characters")
    return text


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
