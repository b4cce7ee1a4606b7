"""User-facing errors.

A :class:`GleeError` is bad input or a missing resource that the user can fix; its message says
what to fix. The CLI prints it as one ``error:`` line and exits 2; the app shows it as a message.
Anything else that escapes is a bug in Glee Studio.
"""

from __future__ import annotations

import errno
from pathlib import Path


class GleeError(ValueError):
    """Bad input (unknown id, missing file, malformed CSV, ...) with a message that says the fix."""

    def naming(self, copy, name: str) -> GleeError:
        """The same message about the user's file ``name`` where it spoke of ``copy``, the
        temporary file it was read from (a user never saw that path)."""
        shown = Path(str(name)).name
        return GleeError(str(self).replace(f"csv:{copy}", shown).replace(str(copy), shown))


def one_line(exc: BaseException, most: int = 200) -> str:
    """A library's exception as a message names it: its type and the first line of its text
    (a damaged file's error from torch or onnxruntime can run to pages)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:most]}" if text else type(exc).__name__


def first_few(items: list[str], first: int) -> str:
    """The first ``first`` of ``items`` as a message names them, and how many more."""
    more = f" and {len(items) - first} more" if len(items) > first else ""
    return ", ".join(items[:first]) + more


FULL = (errno.ENOSPC, errno.EDQUOT)


def disk_message(exc: OSError) -> str:
    """What a failed write means for a person: a full disk (or quota) in plain words, else the
    system's own words without the path it names (a server's paths are not a visitor's)."""
    if exc.errno in FULL:
        return (
            "the disk is full, so nothing was kept (nothing half-written either); free some "
            "space - delete runs or uploads you no longer need - and try again"
        )
    return exc.strerror or type(exc).__name__


# What a stopped command says last (Ctrl-C, or the app's Stop button's SIGTERM); a job whose last
# error line starts with it was stopped, not failed.
INTERRUPTED = (
    "interrupted; finished runs are kept, and so are the finished rounds of a "
    "learning-rate search or a race: launch the same again to go on from them"
)
