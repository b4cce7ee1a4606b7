"""What a visitor reads of a message the app renders as Markdown (user text in it is escaped)."""

import re


def plain(markdown: str) -> str:
    """``a\\.b`` -> ``a.b``: the message without the escapes Markdown drops when it renders."""
    return re.sub(r"\\(.)", r"\1", markdown)
