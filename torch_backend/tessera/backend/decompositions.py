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


# Kept whole (run by ATen's fused CPU attention kernel):
#  * in torch 2.13 the core decomposition of the CPU flash attention gives wrong gradients
#    (GPT-2 training with its causal mask: relative errors > 1 against eager, with plain
#    aot_autograd and no Tessera involved);
#  * in inference, ATen's fused kernel measured faster than the decomposition (ATen batched
#    matmuls around a fused Tessera softmax), since Tessera's own batched matmul does not beat
#    ATen's yet (BERT-base, seq 128: 1.02x vs 0.99x of eager on one thread).
_KEPT = [aten._scaled_dot_product_flash_attention_for_cpu.default]


@functools.lru_cache(maxsize=None)
def _table():
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(_EXTRA))
    return table


def decomposition_table():
    """A fresh copy (aot_autograd may hold on to the dict it is given)."""
    table = dict(_table())
    for op in _KEPT:
        table.pop(op, None)
    return table
