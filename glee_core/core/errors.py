"""User-facing errors.

A :class:`GleeError` is bad input or a missing resource that the user can fix; its message says
what to fix. The CLI prints it as one ``error:`` line and exits 2; the app shows it as a message.
Anything else that escapes is a bug in Glee Studio.
"""

from __future__ import annotations

from pathlib import Path


class GleeError(ValueError):
    """Bad input (unknown id, missing file, malformed CSV, ...) with a message that says the fix."""

    def naming(self, copy, name: str) -> GleeError:
        """The same message about the user's file ``name`` where it spoke of ``copy``, the
        temporary file it was read from (a user never saw that path)."""
        shown = Path(str(name)).name
        return GleeError(str(self).replace(f"csv:{copy}", shown).replace(str(copy), shown))


# What a stopped command says last (Ctrl-C, or the app's Stop button's SIGTERM); a job whose last
# error line starts with it was stopped, not failed.
INTERRUPTED = "interrupted; finished runs are kept, the unfinished one is discarded"
