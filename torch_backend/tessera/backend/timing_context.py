"""The context in which the backend times candidates (anchor.py) and whole graphs (graph_guard.py).

Both run during the first call of a compiled graph, and that call runs under aot_autograd's
dispatch mode that inspects custom-op inputs and outputs: under it every ATen call detours
through Python. Timed there, BERT's compiled graph (more ATen calls than its eager graph) took
2.4x longer than it does afterwards, and small ATen operators several times their real time,
which biased every choice against ATen. The timing calls are not part of the user's computation,
so they run with the modes switched off.
"""

from __future__ import annotations

import contextlib


def without_dispatch_modes():
    try:
        from torch.utils._python_dispatch import _disable_current_modes
    except ImportError:  # a torch without it: time as called
        return contextlib.nullcontext()
    return _disable_current_modes()
