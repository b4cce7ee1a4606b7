"""Waiting in tests on a condition with a deadline, not for a fixed time."""

from __future__ import annotations

import time


def wait_until(condition, timeout: float = 30.0, what: str = "the condition") -> None:
    """Return as soon as ``condition()`` is true; fail after ``timeout`` seconds saying ``what``
    never happened."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        time.sleep(0.01)
