"""Text for Streamlit's Markdown: user strings made literal, durations and estimates in words;
the draw log a bench reads."""

from __future__ import annotations

import contextlib
import functools
import re
import time

from glee_core.core import environment
from glee_core.core.markdown import literal


def md(text) -> str:
    """User text (a class, file or dataset name, a message quoting one) made literal for the
    places Streamlit renders Markdown (``glee_core.core.markdown.literal``): a class named
    ``[Sign in](https://evil.example)`` reads as itself, not as a link."""
    return literal(text)


def code(text) -> str:
    """User text (a file, run, dataset or model name) as a Markdown code span that shows it as
    it is: fenced by one backtick more than the longest run inside it (``md`` in a code span
    showed its escapes: ``upload\\-fortunes\\_labelled``), on one line."""
    text = " ".join(str(text).splitlines())
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F)}


def visible(text) -> str:
    """A text with its control characters written out (``\\x08`` for a backspace), as a table
    shows it: a font draws them as empty boxes. Tabs and line breaks stay."""
    return str(text).translate(CONTROL)


def model_label(name: str) -> str:
    """A backbone as a user reads it: ``auto`` with what it loads."""
    if name == environment.AUTO_MODEL:
        return f"{name} ({environment.AUTO_MODEL_NAME}, offline)"
    return name


def duration(seconds: float) -> str:
    """``45 s``, ``3 min 20 s``, ``1 h 05 min``."""
    seconds = int(max(seconds, 0))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


@contextlib.contextmanager
def draw_logged(what: str):
    """Append a draw's end, ``what``, its wall and its CPU seconds to ``GLEE_DRAW_LOG`` where it
    is set (``bench/app_clicks.py``: the server's share of a click); nothing otherwise."""
    log = environment.draw_log()
    if log is None:
        yield
        return
    wall, cpu = time.perf_counter(), time.thread_time()
    try:
        yield
    finally:
        line = (
            f"{time.time():.3f}\t{what}\t{time.perf_counter() - wall:.3f}\t"
            f"{time.thread_time() - cpu:.3f}\n"
        )
        with contextlib.suppress(OSError), log.open("a") as out:
            out.write(line)


def logged(function):
    """``function``'s draws in the draw log (a fragment's, which no page draw covers)."""

    @functools.wraps(function)
    def drawn(*args, **kwargs):
        with draw_logged(function.__name__):
            return function(*args, **kwargs)

    return drawn
