"""The decomposition table used when tracing graphs for Tessera.

Core ATen decompositions, which keep the operators Tessera lowers as a whole (addmm, bmm,
convolution, native_layer_norm, _softmax, batch norm) and break the rest into primitives
Tessera knows.
"""

from __future__ import annotations

import functools

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

aten = torch.ops.aten

# Decomposed on top of the core table: their pieces are all lowerable, so a model using them
# fuses instead of falling back to ATen for the whole op.
_EXTRA = [
    aten.silu_backward,
    aten.hardswish_backward,
    aten.leaky_relu_backward,
    aten.elu,
]


@functools.lru_cache(maxsize=None)
def _table():
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(_EXTRA))
    return table


def decomposition_table():
    """A fresh copy (aot_autograd may hold on to the dict it is given)."""
    return dict(_table())
