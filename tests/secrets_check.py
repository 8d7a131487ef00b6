"""Everything a user could see of an error or a log record, and the check that no secret is in any of it.

What is searched of an error: the error and every exception reachable from it (:func:`chain`: its
``__cause__`` and ``__context__``, even a suppressed one, and exceptions among its ``args``), each with
its ``str``, its ``repr``, its ``args`` and its formatted traceback (:func:`shown`). Of a log record:
its logger, level, message and traceback as a formatter prints them (:func:`logged`).
"""

from __future__ import annotations

import logging
import traceback
from typing import Iterable


def chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception reachable from it: ``__cause__``, ``__context__``, exceptions in ``args``."""
    found: list[BaseException] = []
    todo = [exc]
    while todo:
        item = todo.pop()
        if any(item is seen for seen in found):
            continue
        found.append(item)
        todo.extend(a for a in item.args if isinstance(a, BaseException))
        todo.extend(linked for linked in (item.__cause__, item.__context__) if linked is not None)
    return found


def shown(exc: BaseException) -> list[str]:
    """What anyone could see of ``exc`` and of everything in its :func:`chain`."""
    texts = []
    for item in chain(exc):
        texts += [str(item), repr(item), *map(str, item.args), *map(repr, item.args)]
        texts.append("".join(traceback.format_exception(type(item), item, item.__traceback__)))
    return texts


def logged(records: Iterable[logging.LogRecord]) -> list[str]:
    """Each record as a formatter prints it (its traceback included)."""
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    return [formatter.format(record) for record in records]


def assert_clean(texts: Iterable[str], secrets: Iterable[str]) -> None:
    """None of ``secrets`` in any of ``texts``."""
    secrets = tuple(secrets)
    for text in texts:
        for secret in secrets:
            assert secret not in text, f"a secret is shown: {text}"


def assert_no_secret(exc: BaseException, secrets: Iterable[str]) -> None:
    """None of ``secrets`` in anything :func:`shown` of ``exc``."""
    assert_clean(shown(exc), secrets)
