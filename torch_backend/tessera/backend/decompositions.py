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


# Left out of graphs that need gradients: in torch 2.13 the core decomposition of the CPU flash
# attention gives wrong gradients (GPT-2 training, causal mask: relative errors > 1 against
# eager, with plain aot_autograd and no Tessera involved). Forward-only graphs keep it: their
# attention then becomes bmm + softmax, which Tessera fuses.
_TRAINING_EXCLUDED = [aten._scaled_dot_product_flash_attention_for_cpu.default]


@functools.lru_cache(maxsize=None)
def _table():
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(_EXTRA))
    return table


def decomposition_table(training: bool = False):
    """A fresh copy (aot_autograd may hold on to the dict it is given)."""
    table = dict(_table())
    if training:
        for op in _TRAINING_EXCLUDED:
            table.pop(op, None)
    return table
