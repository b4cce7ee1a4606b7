"""Is the Hugging Face hub usable from here? Checked before a load, so an offline machine gets a
clear error at once instead of minutes of retries. No torch, no transformers."""

from __future__ import annotations

import os
import socket
from functools import lru_cache
from urllib.parse import urlparse

from huggingface_hub import try_to_load_from_cache


@lru_cache(maxsize=1)
def hub_reachable(timeout: float = 3.0) -> bool:
    """Can this machine reach the Hugging Face hub? (A DNS lookup and a TCP connect, so that an
    offline machine gets a clear error at once instead of minutes of retries.)"""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        return False
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def in_hub_cache(repo_id: str) -> bool:
    """Is a config of this hub id in the local Hugging Face cache (usable offline)?"""
    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:  # an id that is not a valid repo name, or no cache
        return False
