"""The backend's logger ("tessera") and once-per-process messages.

Unsupported operators are reported once per operator name, not once per graph or per call, so a
model with a hundred layers prints one line per missing operator.
"""

from __future__ import annotations

import logging
import threading

logger = logging.getLogger("tessera")

_seen: set = set()
_lock = threading.Lock()


def log_once(key: str, message: str, level: int = logging.INFO) -> bool:
    """Logs `message` the first time `key` is seen in this process; returns True if it logged."""
    with _lock:
        if key in _seen:
            return False
        _seen.add(key)
    logger.log(level, message)
    return True


def reset_log_once() -> None:
    """Forgets which messages were logged (tests use it to see the lines again)."""
    with _lock:
        _seen.clear()
