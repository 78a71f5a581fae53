"""Lowerings of reductions and of the operators built from them: sum/mean/amax/var, softmax and
its backward, layer norm, batch norm (inference and training), pooling.

Norms are written out here from reductions and elementwise ops (rather than with the library's
single-output layer_norm) because ATen returns the saved statistics (mean, rstd) as well.
"""

from __future__ import annotations

import torch

from .lowering import aten, cast, norm_dims, ops, out_dtype, register, reshape, users_of_index


def _count(shape, dims) -> int:
    n = 1
    for d in dims:
        n *= int(shape[d])
    return n


def _float_input(node, metas):
    m = metas[node.args[0]]
    return None if m.dtype == torch.float32 else f"input dtype {m.dtype}"


# ---- plain reductions ---------------------------------------------------------------------

@register([aten.sum.dim_IntList, aten.sum.default], "reduce")
def _sum(ctx, node, x, dim=None, keepdim=False, dtype=None):
    nd = len(x.shape)
    x = cast(x, out_dtype(ctx, node))
    return ops.reduce_sum(x, norm_dims(dim if dim else None, nd), keepdim)


@register([aten.mean.dim, aten.mean.default], "reduce", check=_float_input)
def _mean(ctx, node, x, dim=None, keepdim=False, dtype=None):
    return ops.reduce_mean(x, norm_dims(dim if dim else None, len(x.shape)), keepdim)


@register([aten.amax.default], "reduce")
def _amax(ctx, node, x, dim=(), keepdim=False):
    return ops.reduce_max(x, norm_dims(dim if dim else None, len(x.shape)), keepdim)


@register([aten.amin.default], "reduce")
def _amin(ctx, node, x, dim=(), keepdim=False):
    return ops.reduce_min(x, norm_dims(dim if dim else None, len(x.shape)), keepdim)


def _var_parts(x, dim, correction, keepdim):
    dims = norm_dims(dim, len(x.shape))
    n = _count(x.shape, dims)
    corr = 1 if correction is None else correction
    mean = ops.reduce_mean(x, dims, True)
    d = ops.sub(x, mean)
    var = ops.div(ops.reduce_sum(ops.mul(d, d), dims, keepdim), float(max(n - corr, 0)))
    if not keepdim:
        mean = ops.reduce_mean(x, dims, False)
    return var, mean


@register([aten.var.correction], "reduce", check=_float_input)
def _var(ctx, node, x, dim=None, correction=None, keepdim=False):
    return _var_parts(x, dim, correction, keepdim)[0]


@register([aten.var_mean.correction], "reduce", check=_float_input)
def _var_mean(ctx, node, x, dim=None, correction=None, keepdim=False):
    return _var_parts(x, dim, correction, keepdim)


def _vector_norm_check(node, metas):
    order = node.args[1] if len(node.args) > 1 else node.kwargs.get("ord", 2)
    if order not in (1, 2, float("inf")):
        return f"vector norm of order {order}"
    if node.kwargs.get("dtype") is not None or len(node.args) > 4:
        return "vector norm with a dtype"
    return _float_input(node, metas)


@register([aten.linalg_vector_norm.default], "reduce", check=_vector_norm_check)
def _vector_norm(ctx, node, x, ord=2, dim=None, keepdim=False, dtype=None):
    # Orders 1, 2 and infinity (weight norm's is 2): sum |x|, sqrt(sum x^2), max |x|.
    dims = norm_dims(dim if dim else None, len(x.shape))
    if ord == 2:
        return ops.sqrt(ops.reduce_sum(ops.mul(x, x), dims, keepdim))
    if ord == 1:
        return ops.reduce_sum(ops.abs(x), dims, keepdim)
    return ops.reduce_max(ops.abs(x), dims, keepdim)


@register([aten.any.dim, aten.any.dims, aten.any.default], "reduce")
def _any(ctx, node, x, dim=None, keepdim=False):
    nd = len(x.shape)
    flags = ops.cast(ops.compare(x, 0.0, "ne") if x.dtype != "bool" else x, "int32")
    return ops.compare(ops.reduce_max(flags, norm_dims(dim, nd), keepdim), 0.0, "ne")


# ---- softmax ------------------------------------------------------------------------------

@register([aten._softmax.default], "reduce", check=_float_input)
def _softmax(ctx, node, x, dim, half_to_float=False):
    return ops.softmax(x, dim)


@register([aten._log_softmax.default], "reduce", check=_float_input)
def _log_softmax(ctx, node, x, dim, half_to_float=False):
    return ops.log_softmax(x, dim)


@register([aten._softmax_backward_data.default], "reduce", check=_float_input)
def _softmax_backward(ctx, node, g, y, dim, input_dtype):
    s = ops.reduce_sum(ops.mul(g, y), [dim % len(y.shape)], True)
    return ops.mul(y, ops.sub(g, s))


@register([aten._log_softmax_backward_data.default], "reduce", check=_float_input)
def _log_softmax_backward(ctx, node, g, y, dim, input_dtype):
    s = ops.reduce_sum(g, [dim % len(y.shape)], True)
    return ops.sub(g, ops.mul(ops.exp(y), s))


# ---- normalisation ------------------------------------------------------------------------

@register([aten.native_layer_norm.default], "reduce", check=_float_input)
def _layer_norm(ctx, node, x, normalized_shape, weight, bias, eps):
    nd = len(x.shape)
    dims = list(range(nd - len(normalized_shape), nd))
    mean = ops.reduce_mean(x, dims, True)
    xc = ops.sub(x, mean)
    var = ops.reduce_mean(ops.mul(xc, xc), dims, True)
    rstd = ops.rsqrt(ops.add(var, float(eps)))
    y = ops.mul(xc, rstd)
    if weight is not None:
        y = ops.mul(y, weight)
    if bias is not None:
        y = ops.add(y, bias)
    return (y, mean, rstd)


def _channel(v, nd):
    """A per-channel vector [C] shaped to broadcast over [N, C, ...]."""
    return reshape(v, [int(v.shape[0])] + [1] * (nd - 2))


def _channel_affine(y, weight, bias):
    """y * weight + bias with per-channel [C] vectors over [N, C, ...] (either may be None)."""
    nd = len(y.shape)
    if weight is not None:
        y = ops.mul(y, _channel(weight, nd))
    if bias is not None:
        y = ops.add(y, _channel(bias, nd))
    return y


def _bn_apply(x, mean_c, rstd_c, weight, bias):
    nd = len(x.shape)
    return _channel_affine(ops.mul(ops.sub(x, _channel(mean_c, nd)), _channel(rstd_c, nd)),
                           weight, bias)


def _batch_statistics(x, eps):
    """(mean [C], x - mean, biased variance [C], rstd [C], values per channel) over every dim
    of [N, C, ...] but the channels."""
    nd = len(x.shape)
    dims = [0] + list(range(2, nd))
    mean = ops.reduce_mean(x, dims, False)
    xc = ops.sub(x, _channel(mean, nd))
    var = ops.reduce_mean(ops.mul(xc, xc), dims, False)
    return mean, xc, var, ops.rsqrt(ops.add(var, float(eps))), _count(x.shape, dims)


def _bn_inference_check(node, metas):
    used = users_of_index(node)
    if used - {0}:
        return "batch norm statistics outputs are used"
    return _float_input(node, metas)


@register([aten._native_batch_norm_legit_no_training.default], "elementwise",
          check=_bn_inference_check)
def _bn_inference(ctx, node, x, weight, bias, running_mean, running_var, momentum, eps):
    # y = x * scale + shift with per-channel scale = weight / sqrt(var + eps) and shift = bias -
    # mean * scale: the two [C] vectors are loop-invariant in the [N, C, ...] result, so the
    # stage plan computes them once per call (stage_plan.cc) and each point costs one
    # multiply-add.
    scale = ops.rsqrt(ops.add(running_var, float(eps)))
    if weight is not None:
        scale = ops.mul(scale, weight)
    shift = ops.neg(ops.mul(running_mean, scale))
    if bias is not None:
        shift = ops.add(shift, bias)
    nd = len(x.shape)
    return (ops.add(ops.mul(x, _channel(scale, nd)), _channel(shift, nd)), None, None)


def _bn_training_check(node, metas):
    if len(node.args) > 5 and node.args[5] is False:
        return "batch norm with training=False in the functional form"
    m = metas[node.args[0]]
    if m.ndim < 2:
        return "batch norm input with fewer than 2 dims"
    return _float_input(node, metas)


@register([aten._native_batch_norm_legit_functional.default], "reduce", check=_bn_training_check)
def _bn_training(ctx, node, x, weight, bias, running_mean, running_var, training, momentum, eps):
    mean, xc, var, rstd, n = _batch_statistics(x, eps)
    y = _channel_affine(ops.mul(xc, _channel(rstd, len(x.shape))), weight, bias)
    m = float(momentum)
    new_mean = ops.add(ops.mul(running_mean, 1.0 - m), ops.mul(mean, m))
    unbiased = ops.mul(var, float(n) / max(n - 1, 1))
    new_var = ops.add(ops.mul(running_var, 1.0 - m), ops.mul(unbiased, m))
    return (y, mean, rstd, new_mean, new_var)


@register([aten._native_batch_norm_legit.no_stats], "reduce", check=_bn_training_check)
def _bn_no_stats(ctx, node, x, weight, bias, training, momentum, eps):
    # Batch statistics without running ones (Big Transfer's weight standardisation normalises
    # each convolution's weights this way).
    mean, xc, _, rstd, _ = _batch_statistics(x, eps)
    return (_channel_affine(ops.mul(xc, _channel(rstd, len(x.shape))), weight, bias), mean, rstd)


def _group_norm_check(node, metas):
    m = metas[node.args[0]]
    if m.ndim < 2:
        return "group norm input with fewer than 2 dims"
    return _float_input(node, metas)


@register([aten.native_group_norm.default], "reduce", check=_group_norm_check)
def _group_norm(ctx, node, x, weight, bias, n, c, hw, groups, eps):
    # [N, C, ...] seen as [N, G, C / G, ...] (a split of the channel axis, no merge): each
    # group's statistics reduce its trailing dims, as layer norm's do.
    shape = list(x.shape)
    nd, g = len(shape), int(groups)
    split = [shape[0], g, shape[1] // g] + shape[2:]
    dims = list(range(2, nd + 1))
    xg = reshape(x, split)
    mean = ops.reduce_mean(xg, dims, True)
    xc = ops.sub(xg, mean)
    rstd = ops.rsqrt(ops.add(ops.reduce_mean(ops.mul(xc, xc), dims, True), float(eps)))
    y = _channel_affine(reshape(ops.mul(xc, rstd), shape), weight, bias)
    return (y, reshape(mean, [shape[0], g]), reshape(rstd, [shape[0], g]))


# ---- pooling ------------------------------------------------------------------------------

def _pool_check(node, metas):
    m = metas[node.args[0]]
    if m.ndim != 4:
        return f"{m.ndim}-d pooling input"
    return _float_input(node, metas)


def _pair(v, default):
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        v = default
    if isinstance(v, int):
        return [v, v]
    v = list(v)
    return v * 2 if len(v) == 1 else v


def _max_pool_check(node, metas):
    if users_of_index(node) - {0}:
        return "max pool indices are used"
    return _pool_check(node, metas)


@register([aten.max_pool2d_with_indices.default], "reduce", check=_max_pool_check)
def _max_pool(ctx, node, x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    k = _pair(kernel, None)
    out = ops.max_pool2d(x, k, _pair(stride, k), _pair(padding, 0), _pair(dilation, 1),
                         bool(ceil_mode))
    return (out, None)


def _avg_pool_check(node, metas):
    if len(node.args) > 6 and node.args[6] is not None:
        return "avg_pool2d divisor_override"
    return _pool_check(node, metas)


@register([aten.avg_pool2d.default], "reduce", check=_avg_pool_check)
def _avg_pool(ctx, node, x, kernel, stride=(), padding=0, ceil_mode=False,
              count_include_pad=True, divisor_override=None):
    k = _pair(kernel, None)
    return ops.avg_pool2d(x, k, _pair(stride, k), _pair(padding, 0), bool(ceil_mode),
                          bool(count_include_pad))


def _adaptive_check(node, metas):
    m = metas[node.args[0]]
    if m.ndim != 4:
        return f"{m.ndim}-d adaptive pooling input"
    oh, ow = _pair(node.args[1], None)
    if m.shape[2] % oh or m.shape[3] % ow:
        return "adaptive pooling with uneven windows"
    return _float_input(node, metas)


@register([aten._adaptive_avg_pool2d.default], "reduce", check=_adaptive_check)
def _adaptive_avg_pool(ctx, node, x, output_size):
    oh, ow = _pair(output_size, None)
    h, w = int(x.shape[2]), int(x.shape[3])
    if oh == 1 and ow == 1:
        return ops.reduce_mean(x, [2, 3], True)
    k = [h // oh, w // ow]
    return ops.avg_pool2d(x, k, k, [0, 0], False, True)
