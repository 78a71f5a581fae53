"""Lowerings of shape and data-movement operators.

Views (kind "view") are index arithmetic in a kernel; outside one they run as ATen views, which
cost nothing. Their Tessera shape is always read from the recorded meta, so -1 entries and
symbolic sizes never need resolving here.
"""

from __future__ import annotations

import operator

import torch

from .lowering import aten, cast, identity, ops, register, reshape, same_shape


def _out_shape(ctx, node):
    return list(ctx.meta(node).shape)


@register([aten.view.default, aten._unsafe_view.default, aten.reshape.default,
           aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default,
           aten.view_copy.default], "view")
def _view(ctx, node, x, *args, **kwargs):
    return reshape(x, _out_shape(ctx, node))


@register([aten.permute.default], "view")
def _permute(ctx, node, x, dims):
    nd = len(x.shape)
    perm = [d % nd for d in dims]
    return x if perm == list(range(nd)) else ops.permute(x, perm)


@register([aten.t.default], "view")
def _t(ctx, node, x):
    return ops.permute(x, [1, 0]) if len(x.shape) == 2 else x


@register([aten.transpose.int], "view")
def _transpose(ctx, node, x, d0, d1):
    nd = len(x.shape)
    perm = list(range(nd))
    perm[d0 % nd], perm[d1 % nd] = perm[d1 % nd], perm[d0 % nd]
    return x if perm == list(range(nd)) else ops.permute(x, perm)


@register([aten.expand.default], "view")
def _expand(ctx, node, x, size, implicit=False):
    shape = _out_shape(ctx, node)
    return x if same_shape(x.shape, shape) else ops.broadcast_to(x, shape)


@register([aten.alias.default, aten.detach.default, aten.lift_fresh.default], "view")
def _alias(ctx, node, x):
    return x


def _slice_bounds(n, start, end, step):
    start = 0 if start is None else start
    end = n if end is None else end
    start = max(min(start + n if start < 0 else start, n), 0)
    end = max(min(end + n if end < 0 else end, n), 0)
    return start, max(end, start), step


@register([aten.slice.Tensor], "view")
def _slice(ctx, node, x, dim=0, start=None, end=None, step=1):
    nd = len(x.shape)
    dim %= nd
    s, e, st = _slice_bounds(int(x.shape[dim]), start, end, step)
    if s == 0 and e == int(x.shape[dim]) and st == 1:
        return x
    return ops.slice(x, dim, s, e, st)


@register([aten.select.int], "view")
def _select(ctx, node, x, dim, index):
    nd = len(x.shape)
    dim %= nd
    n = int(x.shape[dim])
    index = index + n if index < 0 else index
    return reshape(ops.slice(x, dim, index, index + 1, 1), _out_shape(ctx, node))


def _split(x, sizes, dim):
    nd = len(x.shape)
    dim %= nd
    out, start = [], 0
    for s in sizes:
        out.append(ops.slice(x, dim, start, start + s, 1))
        start += s
    return tuple(out)


@register([aten.split_with_sizes.default], "view")
def _split_with_sizes(ctx, node, x, sizes, dim=0):
    return _split(x, sizes, dim)


@register([aten.split.Tensor], "view")
def _split_tensor(ctx, node, x, size, dim=0):
    n = int(x.shape[dim % len(x.shape)])
    sizes = [min(size, n - i) for i in range(0, n, size)] if size > 0 else [n]
    return _split(x, sizes, dim)


@register([aten.unbind.int], "view")
def _unbind(ctx, node, x, dim=0):
    nd = len(x.shape)
    dim %= nd
    shape = [int(d) for i, d in enumerate(x.shape) if i != dim]
    return tuple(reshape(ops.slice(x, dim, i, i + 1, 1), shape)
                 for i in range(int(x.shape[dim])))


@register([operator.getitem], "view")
def _getitem(ctx, node, value, index):
    return value[index]


# ---- copies: concatenation, padding, indexing ----------------------------------------------

@register([aten.cat.default], "elementwise")
def _cat(ctx, node, tensors, dim=0):
    nd = len(ctx.meta(node).shape)
    parts = [t for t in tensors if len(t.shape) == nd and all(int(d) != 0 for d in t.shape)]
    if len(parts) == 1:
        return identity(parts[0])
    return ops.concat(parts, dim % nd)


def _pad_check(node, metas):
    pads = node.args[1]
    if any(p < 0 for p in pads):
        return "negative (cropping) constant_pad_nd"
    return None


@register([aten.constant_pad_nd.default], "elementwise", check=_pad_check)
def _constant_pad(ctx, node, x, pad, value=0):
    nd = len(x.shape)
    pads = [(0, 0)] * nd
    for i in range(len(pad) // 2):
        pads[nd - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    return ops.pad(x, pads, float(value))


def _index_dtype_check(node, metas, pos):
    m = metas[node.args[pos]]
    if m.dtype not in (torch.int64, torch.int32):
        return f"indices of dtype {m.dtype}"
    return None


@register([aten.embedding.default], "elementwise",
          check=lambda n, m: _index_dtype_check(n, m, 1))
def _embedding(ctx, node, weight, indices, padding_idx=-1, scale_grad_by_freq=False,
               sparse=False):
    return ops.index_select(weight, 0, indices)


@register([aten.index_select.default], "elementwise",
          check=lambda n, m: _index_dtype_check(n, m, 2))
def _index_select(ctx, node, x, dim, index):
    return ops.index_select(x, dim % len(x.shape), index)


@register([aten.gather.default], "elementwise", check=lambda n, m: _index_dtype_check(n, m, 2))
def _gather(ctx, node, x, dim, index, sparse_grad=False):
    return ops.gather(x, dim % len(x.shape), index)



def _index_check(node, metas):
    """x[..., i0, i1, ..., ...] with integer index tensors at consecutive dims; the rest (bool
    masks: data-dependent shapes; index tensors apart, whose broadcast dims torch moves to the
    front) runs through ATen."""
    given = [i for i, a in enumerate(node.args[1]) if a is not None]
    if not given:
        return "no index tensor"
    if given != list(range(given[0], given[-1] + 1)):
        return "index tensors at dims that are not consecutive"
    for i in given:
        m = metas[node.args[1][i]]
        if m.dtype not in (torch.int64, torch.int32):
            return f"index of dtype {m.dtype}"
    return None


@register([aten.index.Tensor], "elementwise", check=_index_check)
def _index(ctx, node, x, indices):
    # Index tensors at consecutive dims k..k+m-1: torch's result replaces those dims by the
    # indices' broadcast shape. The dims are merged into one (a reshape) and the indices into
    # one flat index into it (row-major), which is index_select with any-shaped indices.
    # Negative indices count from the end of their dim, as in torch.
    given = [(i, a) for i, a in enumerate(indices) if a is not None]
    k, m = given[0][0], len(given)
    shape = list(x.shape)
    flat = None
    for i, idx in given:
        n = int(shape[i])
        idx = ops.where(ops.compare(idx, 0.0, "lt"), ops.add(idx, float(n)), idx)
        flat = idx if flat is None else ops.add(ops.mul(flat, float(n)), idx)
    if m > 1:
        merged = 1
        for d in shape[k:k + m]:
            merged *= int(d)
        x = reshape(x, shape[:k] + [merged] + shape[k + m:])
    return ops.index_select(x, k, flat)


def _slice_scatter_check(node, metas):
    step = node.args[5] if len(node.args) > 5 else node.kwargs.get("step", 1)
    return None if step == 1 else f"slice_scatter with step {step}"


@register([aten.slice_scatter.default], "elementwise", check=_slice_scatter_check)
def _slice_scatter(ctx, node, x, src, dim=0, start=None, end=None, step=1):
    # x with x[start:end] along dim replaced by src: the parts of x around it, concatenated.
    nd = len(x.shape)
    dim %= nd
    n = int(x.shape[dim])
    s, e, _ = _slice_bounds(n, start, end, step)
    parts = ([ops.slice(x, dim, 0, s, 1)] if s > 0 else []) + [cast(src, _dtype(ctx, node))] + \
        ([ops.slice(x, dim, e, n, 1)] if e < n else [])
    return identity(parts[0]) if len(parts) == 1 else ops.concat(parts, dim)


@register([aten.copy.default], "elementwise")
def _copy(ctx, node, x, src, non_blocking=False):
    # The functional copy (what an in-place slice assignment becomes in a functional graph):
    # src broadcast to x's shape, in x's dtype.
    shape = _out_shape(ctx, node)
    src = cast(src, _dtype(ctx, node))
    return identity(src) if same_shape(src.shape, shape) else ops.broadcast_to(src, shape)


@register([aten.repeat.default], "elementwise")
def _repeat(ctx, node, x, repeats):
    # [s0, s1] repeated [r0, r1]: viewed as [1, s0, 1, s1], broadcast to [r0, s0, r1, s1] and
    # merged to [r0 * s0, r1 * s1]; missing leading dims of x count as size 1.
    reps = [int(r) for r in repeats]
    sizes = [1] * (len(reps) - len(x.shape)) + [int(d) for d in x.shape]
    spread = reshape(x, [d for s in sizes for d in (1, s)])
    wide = ops.broadcast_to(spread, [d for r, s in zip(reps, sizes) for d in (r, s)])
    return reshape(wide, _out_shape(ctx, node))


def _dtype(ctx, node):
    return ctx.meta(node).dtype
