"""User text made literal where Markdown is rendered: the app's pages and the model card.

A class, file or dataset name is data: ``[Sign in](https://evil.example)`` must read as itself,
not as a link; ``a|b`` must not split a table cell; ``<img onerror=...>`` must not become HTML
where the renderer allows it (the Hugging Face Hub renders a card's HTML).
"""

from __future__ import annotations

import html
import re

MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:])")
# A renderer without the app's extras (the Hub's cards: no :emoji: shortcodes, no $math$) needs
# fewer escapes mid-line: only what makes markup anywhere, and a block marker at the start
INLINE_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")
LINE_START = re.compile(r"^(\s*\d*)([#+\-.!>)])")  # "- a", "# a", "1. a": \-, \#, 1\.
AUTOLINK = re.compile(r"(?i)(://|www\.|@)")  # where Markdown would start a link on its own


def literal(text, html_too: bool = False) -> str:
    """``text`` made literal for Markdown: every Markdown character escaped, a zero-width space
    put into ``://``, ``www.`` and ``@`` (which Markdown links even when escaped); ``html_too``
    (a renderer that passes HTML through, such as the Hub's, and table cells): ``&``, ``<``
    and ``>`` as entities as well, line breaks as spaces, and only the characters that make
    markup mid-line escaped (a list or heading marker at the start too)."""
    text = str(text)
    if html_too:
        text = text.replace("\r", " ").replace("\n", " ")
    text = AUTOLINK.sub(lambda m: m.group(0)[0] + "\u200b" + m.group(0)[1:], text)
    if html_too:  # escaped text shows its backslashes where a renderer keeps them: few
        escaped = INLINE_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))
        return LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), escaped)
    return MARKDOWN_SPECIAL.sub(r"\\\1", text)
