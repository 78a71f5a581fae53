"""Lowerings of the anchor operators: matrix products and 1-D and 2-D convolutions.

Operands stored transposed (a weight read through .t(), a key through .transpose(-1, -2)) reach
the kernel in their physical layout; the matmul then uses its trans_a / trans_b forms on the
physical tensor, which keeps the operand reads contiguous.
"""

from __future__ import annotations

import torch

from .lowering import aten, ops, register, reshape


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
    if m.ndim not in (3, 4):
        return f"{m.ndim - 2}-d convolution"
    return _float32_operands(node, metas)


def _height_one(t):
    """[N, C, L] as [N, C, 1, L]."""
    return reshape(t, [t.shape[0], t.shape[1], 1, t.shape[2]])


def _one(v) -> list:
    """A 1-D convolution's stride, padding, dilation or output_padding, as one value."""
    return [int(v[0])]


def _pair(v) -> list:
    """aten.convolution's stride, padding, dilation and output_padding: one value per spatial
    dimension, or a single value for all of them (nn.Conv2d(padding="valid") gives [0])."""
    v = [int(x) for x in v]
    return v * 2 if len(v) == 1 else v


@register([aten.convolution.default], "anchor", check=_conv_check)
def _convolution(ctx, node, x, w, bias, stride, padding, dilation, transposed, output_padding,
                 groups):
    if len(x.shape) == 3:  # 1-D: the 2-D convolution of a height-1 image, then the row
        y = _convolution(ctx, node, _height_one(x), _height_one(w), bias, [1] + _one(stride),
                         [0] + _one(padding), [1] + _one(dilation), transposed,
                         [0] + _one(output_padding), groups)
        return reshape(y, [y.shape[0], y.shape[1], y.shape[3]])
    if transposed:
        return ops.conv_transpose2d(x, w, bias, _pair(stride), _pair(padding),
                                    _pair(output_padding), _pair(dilation), int(groups))
    return ops.conv2d(x, w, bias, _pair(stride), _pair(padding), _pair(dilation), int(groups))
