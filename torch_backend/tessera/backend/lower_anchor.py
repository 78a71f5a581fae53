"""Lowerings of the anchor operators: matrix products and 2-D convolutions.

Operands stored transposed (a weight read through .t(), a key through .transpose(-1, -2)) reach
the kernel in their physical layout; the matmul then uses its trans_a / trans_b forms on the
physical tensor, which keeps the operand reads contiguous.
"""

from __future__ import annotations

import torch

from .lowering import aten, ops, register


def _swaps_last_two(perm, nd):
    want = list(range(nd))
    want[-1], want[-2] = want[-2], want[-1]
    return list(perm) == want


def _operand(ctx, node_arg, value):
    """(tensor, transposed): the physical placeholder when the operand is a transposed input."""
    phys = ctx.physical.get(node_arg)
    if phys is not None:
        placeholder, perm = phys
        if _swaps_last_two(perm, len(perm)):
            return placeholder, True
    return value, False


def _float32_operands(node, metas):
    for a in node.args:
        m = metas.get(a) if hasattr(a, "op") else None
        if m is not None and hasattr(m, "dtype") and m.dtype != torch.float32:
            return f"operand dtype {m.dtype}"
    return None


@register([aten.mm.default], "anchor", check=_float32_operands)
def _mm(ctx, node, a, b):
    a, ta = _operand(ctx, node.args[0], a)
    b, tb = _operand(ctx, node.args[1], b)
    return ops.matmul(a, b, ta, tb)


@register([aten.addmm.default], "anchor", check=_float32_operands)
def _addmm(ctx, node, bias, a, b, beta=1, alpha=1):
    a, ta = _operand(ctx, node.args[1], a)
    b, tb = _operand(ctx, node.args[2], b)
    y = ops.matmul(a, b, ta, tb)
    if alpha != 1:
        y = ops.mul(y, float(alpha))
    if beta == 0:
        return y
    if beta != 1:
        bias = ops.mul(bias, float(beta))
    return ops.add(y, bias)


@register([aten.bmm.default], "anchor", check=_float32_operands)
def _bmm(ctx, node, a, b):
    a, ta = _operand(ctx, node.args[0], a)
    b, tb = _operand(ctx, node.args[1], b)
    return ops.batch_matmul(a, b, ta, tb)


def _conv_check(node, metas):
    m = metas[node.args[0]]
    if m.ndim != 4:
        return f"{m.ndim - 2}-d convolution"
    return _float32_operands(node, metas)


@register([aten.convolution.default], "anchor", check=_conv_check)
def _convolution(ctx, node, x, w, bias, stride, padding, dilation, transposed, output_padding,
                 groups):
    if transposed:
        return ops.conv_transpose2d(x, w, bias, list(stride), list(padding), list(output_padding),
                                    list(dilation), int(groups))
    return ops.conv2d(x, w, bias, list(stride), list(padding), list(dilation), int(groups))
