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

The terminal's stderr is shared by the bar, a prompt that answers a server's
question (:mod:`.ask`) and the server's stderr lines (``--stderr show``):
each writes inside :func:`screen`, which takes the bar off the line first (it
comes back with the next update), so no two of them interleave.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import threading
import time
from collections.abc import Iterator
from typing import Any, TextIO

from .output import printable

__all__ = ["PlainBar", "ProgressBar", "TqdmBar", "WaitNotice", "progress_bar", "screen"]

_SCREEN = threading.RLock()  # one writer of the terminal's stderr at a time (bars, prompts, server stderr)
_shown_bars: list[ProgressBar] = []  # the bar on the screen now, if any (under _SCREEN)


@contextlib.contextmanager
def screen() -> Iterator[None]:
    """Hold stderr for lines of one's own (a prompt, a server's stderr line): a bar shown is cleared first."""
    with _SCREEN:
        while _shown_bars:
            _shown_bars[0].hide()  # which takes it off the list
        yield

_INTERVAL = 0.1  # seconds between two drawings of a bar (the last one is always drawn)
_BAR_WIDTH = 24


class ProgressBar:
    """A progress display: ``update(progress, total, message)`` from any thread, then ``close()``."""

    def __init__(self, stream: TextIO, label: str) -> None:
        self.stream = stream
        self.label = label
        self._lock = _SCREEN
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
                self._draw(progress, total, printable(message) if message else message)
                if self not in _shown_bars:
                    _shown_bars.append(self)
            except Exception:  # noqa: BLE001 - a bar must never break the call it shows
                self._broken = True

    def hide(self) -> None:
        """Take the bar off the line for now (under :func:`screen`); the next update draws it again."""
        with self._lock:
            if self in _shown_bars:
                _shown_bars.remove(self)
            self._last = 0.0
            if not self._broken:
                try:
                    self._clear()
                    self._cleared()
                except Exception:  # noqa: BLE001 - as in update
                    self._broken = True

    def close(self) -> None:
        """Take the bar off the screen (idempotent)."""
        with self._lock:
            if self in _shown_bars:
                _shown_bars.remove(self)
            if self._broken:
                return
            self._broken = True
            with contextlib.suppress(Exception):  # as above
                self._clear()

    def _cleared(self) -> None:
        """After a hide: the next drawing starts afresh."""

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
            text = f"{printable(self.label)} [{'#' * filled}{'-' * (_BAR_WIDTH - filled)}] {_number(progress)}/{_number(total)} {share:4.0%}"
        else:
            text = f"{printable(self.label)} {_number(progress)}"
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

    def _cleared(self) -> None:
        self._shown = 0


class TqdmBar(ProgressBar):
    """A tqdm bar (made on the first update, when the total is known)."""

    def __init__(self, stream: TextIO, label: str, tqdm: Any) -> None:
        super().__init__(stream, label)
        self._tqdm = tqdm
        self._bar: Any = None

    def _draw(self, progress: float, total: float | None, message: str | None) -> None:
        if self._bar is None:
            self._bar = self._tqdm(total=total, desc=printable(self.label), file=self.stream, leave=False, dynamic_ncols=True,
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

    def _cleared(self) -> None:
        self._bar = None  # made again (with its count) by the next update


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
        if self._stopped.wait(self._delay) or not _SCREEN.acquire(blocking=False):
            return  # answered, or a prompt holds the screen (the server asked something: it is not silent)
        try:
            with contextlib.suppress(Exception):  # a notice must never break the command
                self._stream.write(printable(self._text) + "\n")
                self._stream.flush()
        finally:
            _SCREEN.release()

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
