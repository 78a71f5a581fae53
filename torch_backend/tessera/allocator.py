"""Keeping freed tensor memory in the process (glibc malloc), so that kernels do not fault pages.

glibc gives an allocation above its mmap threshold (128 KiB at start, raised as large blocks are
freed, at most 32 MiB) pages of its own, and returns freed memory at the top of the heap to the
system once more than the trim threshold is free there. A CPU inference step allocates and
frees the same activation-sized blocks on every call, and depending on the order in which
earlier work left the heap, each of those can land on fresh pages: every call then faults its
outputs in page by page. Measured here: a depthwise conv + BatchNorm + ReLU6 block at 3.7 ms
eager with 1,700 page faults per call against 0.33 ms and none with memory kept, and
MobileNetV2's eager step 18 ms (3,500 faults) against 15.5 ms (none). Which state a process
lands in depends on its history, so timings (Tessera's own measured choices included) moved by
whole factors between runs.

PyTorch's CPU performance guide answers this with jemalloc or tcmalloc preloaded by a launcher;
Tessera sets glibc's two thresholds at import instead (no new dependency, no launcher): freed
blocks up to MMAP_THRESHOLD_BYTES come from and go back to the heap, and up to
TRIM_THRESHOLD_BYTES of free memory stays at its top. The cost is memory the process keeps after
freeing it, bounded by its peak use. It applies to the whole process, eager PyTorch included,
so comparisons in one process stay fair. TESSERA_MALLOC=system leaves malloc as it was.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Dict

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# The largest mmap threshold glibc accepts on 64-bit systems (its DEFAULT_MMAP_THRESHOLD_MAX):
# blocks up to it are served from the heap.
MMAP_THRESHOLD_BYTES = 32 << 20
# Free memory kept at the heap's top before it is returned: several steps' activations.
TRIM_THRESHOLD_BYTES = 1 << 30

state: Dict[str, object] = {"applied": False, "reason": "not tried"}


def keep_freed_memory() -> bool:
    """Sets glibc's thresholds (once); False, with state["reason"], where it does not apply."""
    if state["applied"]:
        return True
    if os.environ.get("TESSERA_MALLOC", "") == "system":
        state["reason"] = "TESSERA_MALLOC=system"
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        state["reason"] = "no glibc mallopt (another C library)"
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1 and \
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1
    state["applied"] = ok
    state["reason"] = "set" if ok else "mallopt refused the thresholds"
    return ok
