"""Progress bars on stderr for tool calls that report progress.

``MCPCALL_PROGRESS`` chooses: ``auto`` (the default: a bar only when stderr
is a terminal; tqdm when it can be imported, the ``mcpcall[progress]`` extra,
else a one-line text bar), ``plain`` or ``tqdm`` (always, even when stderr is
no terminal), ``off``. A bar is never written to stdout. The same
setting governs the one line that says a server is slow to answer
(:class:`WaitNotice`).

``update`` runs on the client's callbacks thread: it only formats a line and
writes it (at most ten times a second), under a lock, and never raises; a
stderr that cannot be written turns the bar off.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import threading
import time
from typing import Any, TextIO

__all__ = ["PlainBar", "ProgressBar", "TqdmBar", "WaitNotice", "progress_bar"]

_INTERVAL = 0.1  # seconds between two drawings of a bar (the last one is always drawn)
_BAR_WIDTH = 24


class ProgressBar:
    """A progress display: ``update(progress, total, message)`` from any thread, then ``close()``."""

    def __init__(self, stream: TextIO, label: str) -> None:
        self.stream = stream
        self.label = label
        self._lock = threading.Lock()
        self._last = 0.0
        self._broken = False

    def update(self, progress: float, total: float | None, message: str | None) -> None:
        """Show ``progress`` (of ``total`` when known); the callback signature of ``call_tool(on_progress=)``."""
        with self._lock:
            if self._broken:
                return
            now = time.monotonic()
            final = total is not None and progress >= total
            if not final and now - self._last < _INTERVAL:
                return
            self._last = now
            try:
                self._draw(progress, total, message)
            except Exception:  # noqa: BLE001 - a bar must never break the call it shows
                self._broken = True

    def close(self) -> None:
        """Take the bar off the screen (idempotent)."""
        with self._lock:
            if self._broken:
                return
            self._broken = True
            with contextlib.suppress(Exception):  # as above
                self._clear()

    def _draw(self, progress: float, total: float | None, message: str | None) -> None:
        raise NotImplementedError

    def _clear(self) -> None:
        raise NotImplementedError


def _number(value: float) -> str:
    return f"{value:g}"


class PlainBar(ProgressBar):
    """A one-line text bar redrawn in place with ``\\r``: ``label [#####-----] 3/5 60% message``."""

    def __init__(self, stream: TextIO, label: str) -> None:
        super().__init__(stream, label)
        self._shown = 0

    def line(self, progress: float, total: float | None, message: str | None) -> str:
        """The text of the bar (no ``\\r``), cut to the terminal's width."""
        if total is not None and total > 0:
            share = min(max(progress / total, 0.0), 1.0)
            filled = int(share * _BAR_WIDTH)
            text = f"{self.label} [{'#' * filled}{'-' * (_BAR_WIDTH - filled)}] {_number(progress)}/{_number(total)} {share:4.0%}"
        else:
            text = f"{self.label} {_number(progress)}"
        if message:
            text += "  " + " ".join(message.split())
        width = shutil.get_terminal_size((80, 24)).columns - 1
        return text[: max(width, 20)]

    def _draw(self, progress: float, total: float | None, message: str | None) -> None:
        text = self.line(progress, total, message)
        self.stream.write("\r" + text + " " * max(self._shown - len(text), 0))
        self.stream.flush()
        self._shown = len(text)

    def _clear(self) -> None:
        if self._shown:
            self.stream.write("\r" + " " * self._shown + "\r")
            self.stream.flush()


class TqdmBar(ProgressBar):
    """A tqdm bar (made on the first update, when the total is known)."""

    def __init__(self, stream: TextIO, label: str, tqdm: Any) -> None:
        super().__init__(stream, label)
        self._tqdm = tqdm
        self._bar: Any = None

    def _draw(self, progress: float, total: float | None, message: str | None) -> None:
        if self._bar is None:
            self._bar = self._tqdm(total=total, desc=self.label, file=self.stream, leave=False, dynamic_ncols=True,
                                   mininterval=_INTERVAL, bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:g}/{total:g} [{elapsed}]{postfix}" if total
                                   else "{desc}: {n:g} [{elapsed}]{postfix}")
        bar = self._bar
        if total is not None and bar.total != total:
            bar.total = total
        bar.n = progress
        if message:
            bar.set_postfix_str(" ".join(message.split()), refresh=False)
        bar.refresh()

    def _clear(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _tqdm_class() -> Any:
    try:
        return importlib.import_module("tqdm").tqdm
    except Exception:  # noqa: BLE001 - not installed (or broken): the plain bar does
        return None


def _mode(stream: TextIO) -> str | None:
    """``MCPCALL_PROGRESS`` for ``stream``: None for nothing shown (off, or auto on no terminal), else the mode."""
    mode = os.environ.get("MCPCALL_PROGRESS", "").strip().lower() or "auto"
    if mode in ("off", "none", "no", "0", "false"):
        return None
    if mode not in ("plain", "tqdm"):
        try:
            if not stream.isatty():
                return None
        except (AttributeError, ValueError, OSError):
            return None
    return mode


class WaitNotice:
    """One line on ``stream`` when a server has not answered after ``delay`` seconds; ``stop()`` when it has.

    Shown when a progress bar would be (``MCPCALL_PROGRESS``: on a terminal,
    or always with plain or tqdm); a thread of its own waits, and ``stop()``
    ends it (idempotent). The line is written once at most, and never raises.
    """

    def __init__(self, stream: TextIO, text: str, delay: float = 3.0) -> None:
        self._stream = stream
        self._text = text
        self._delay = delay
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        if _mode(stream) is not None:
            self._thread = threading.Thread(target=self._wait, name="mcpcall-notice-cli", daemon=True)
            self._thread.start()

    def _wait(self) -> None:
        if not self._stopped.wait(self._delay):
            with contextlib.suppress(Exception):  # a notice must never break the command
                self._stream.write(self._text + "\n")
                self._stream.flush()

    def stop(self) -> None:
        """No line after this returns."""
        self._stopped.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()


def progress_bar(stream: TextIO, label: str) -> ProgressBar | None:
    """The bar ``MCPCALL_PROGRESS`` and ``stream`` call for, or None (no bar)."""
    mode = _mode(stream)
    if mode is None:
        return None
    if mode != "plain":
        tqdm = _tqdm_class()
        if tqdm is not None:
            return TqdmBar(stream, label, tqdm)
    return PlainBar(stream, label)
