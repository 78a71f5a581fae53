"""Compiling without the cyclic garbage collector.

Tracing and planning a model allocate hundreds of thousands of small objects (FX nodes, fake
tensors, tensor expressions), and each allocation burst lets Python's cyclic collector run a full
collection over everything the process holds; after a first compile that is a large heap, and a
single collection took a third of a warm compile's planning time. Compiling creates few cycles, so
the collector is paused while it runs and resumed (with one collection of the youngest
generation) when it ends.
"""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def gc_paused():
    """Pauses the cyclic collector for the block (nested uses keep it paused)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
            gc.collect(0)
