"""Text for Streamlit's Markdown: user strings made literal, durations and estimates in words."""

from __future__ import annotations

from glee_core.studio import (
    environment,
    literal,
)


def md(text) -> str:
    """User text (a class, file or dataset name, a message quoting one) made literal for the
    places Streamlit renders Markdown (``glee_core.core.markdown.literal``): a class named
    ``[Sign in](https://evil.example)`` reads as itself, not as a link."""
    return literal(text)


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
