"""User-facing errors.

A :class:`GleeError` is bad input or a missing resource that the user can fix; its message says
what to fix. The CLI prints it as one ``error:`` line and exits 2; the app shows it as a message.
Anything else that escapes is a bug in Glee Studio.
"""

from __future__ import annotations


class GleeError(ValueError):
    """Bad input (unknown id, missing file, malformed CSV, ...) with a message that says the fix."""


# What a stopped command says last (Ctrl-C, or the app's Stop button's SIGTERM); a job whose last
# error line starts with it was stopped, not failed.
INTERRUPTED = "interrupted; finished runs are kept, the unfinished one is discarded"
