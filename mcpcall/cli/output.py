"""Exit codes, the output stream (a closed pipe told apart from every other failure), and terminal-safe text.

Every string a server controls (tool names, descriptions, results, errors,
stderr lines, progress and elicitation messages) reaches a person through
:func:`printable`: :meth:`Output.write` and :func:`say` apply it to all they
write, the progress bars and prompts call it themselves. Control characters
but newline and tab (C0, DEL, C1; ESC with them, so no escape sequence
survives: no OSC 52 clipboard write, no hidden text, no line rewrite) are
shown as ``\\xNN``. ``--json`` output is JSON: C0 is escaped by
``json.dumps`` itself, and :meth:`Output.json` escapes DEL and C1 too
(``ensure_ascii=False`` leaves them raw).
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from typing import Any, TextIO

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_OK",
    "EXIT_OUTPUT",
    "EXIT_RPC",
    "EXIT_SERVER",
    "EXIT_TIMEOUT",
    "EXIT_TOOL_ERROR",
    "EXIT_USAGE",
    "Output",
    "OutputClosed",
    "OutputFailed",
    "discard_rest",
    "flushed",
    "json_text",
    "printable",
    "say",
]

EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE, EXIT_SERVER, EXIT_TIMEOUT, EXIT_RPC = 0, 1, 2, 3, 4, 5
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader went away
EXIT_OUTPUT = 74  # EX_IOERR (sysexits.h): the output could not be written


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # all of C0 but \t and \n, DEL, all of C1
_JSON_RAW = re.compile("[\x7f-\x9f]")  # what json.dumps(ensure_ascii=False) leaves unescaped of those


def printable(text: str) -> str:
    """``text`` safe for a terminal: each control character but ``\\n`` and ``\\t`` shown as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def json_text(value: Any) -> str:
    """``value`` as indented JSON, every control character escaped (DEL and C1 as ``\\u00NN`` too)."""
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)  # outside strings JSON is ASCII: only strings change


class OutputClosed(Exception):
    """Whoever reads the output stopped reading (``mcpcall tools | head -1``)."""


class OutputFailed(Exception):
    """The output cannot be written (a full disk, ``> /dev/full``)."""


class Output:
    """The output stream, with a broken pipe told apart from every other error on the way.

    An unbuffered stream (``python -u``, ``PYTHONUNBUFFERED=1``) is written
    through its raw file, all of it: ``TextIOWrapper`` over a raw file drops
    what a short write to a pipe left over, so a reader that went away
    mid-write would go unnoticed and the output would end silently.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        buffer = getattr(stream, "buffer", None)
        self._raw = buffer if isinstance(buffer, io.RawIOBase) else None

    def write(self, text: str) -> None:
        """Write ``text`` for a person (through :func:`printable`); :class:`OutputClosed` or :class:`OutputFailed` when that fails."""
        self._write(printable(text))

    def _write(self, text: str) -> None:
        try:
            if self._raw is None:
                self.stream.write(text)
                return
            data = memoryview(text.encode(getattr(self.stream, "encoding", None) or "utf-8", "replace"))
            while data:
                written = self._raw.write(data)
                data = data[written or 0 :]
        except BrokenPipeError as exc:
            raise OutputClosed from exc
        except (OSError, ValueError) as exc:
            raise OutputFailed(str(exc)) from exc

    def json(self, value: Any) -> None:
        """Write ``value`` as indented JSON and a newline (:func:`json_text`)."""
        self._write(json_text(value) + "\n")

    def flush(self) -> None:
        """Flush the stream; the same errors as :meth:`write`."""
        try:
            self.stream.flush()
        except BrokenPipeError as exc:
            raise OutputClosed from exc
        except (OSError, ValueError) as exc:
            raise OutputFailed(str(exc)) from exc


def discard_rest(stream: TextIO) -> None:
    """Point a broken ``sys.stdout``/``sys.stderr`` at /dev/null.

    What is still buffered then goes nowhere at exit, instead of failing again
    in Python's own flush ("Exception ignored ... BrokenPipeError", status 120).
    Other streams are left alone: they are not flushed by the interpreter at exit.
    """
    if stream not in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        return
    try:
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError):  # no file descriptor (a StringIO, Jupyter), or closed
        return
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def flushed(stream: TextIO) -> bool:
    """Flush ``stream``; False (and the rest discarded) when its reader went away."""
    try:
        stream.flush()
    except BrokenPipeError:
        discard_rest(stream)
        return False
    except (OSError, ValueError):
        pass
    return True


def say(text: str) -> None:
    """A message on stderr (through :func:`printable`). A closed stderr is no error of its own: the exit status still tells."""
    try:
        sys.stderr.write(printable(text))
        sys.stderr.flush()
    except BrokenPipeError:
        discard_rest(sys.stderr)
    except (OSError, ValueError):
        pass
