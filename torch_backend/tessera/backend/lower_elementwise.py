"""Lowerings of pointwise ATen operators (and of tensors that read no input: full, arange).

Type promotion follows torch: arithmetic runs in the node's result dtype (read from the
recorded meta), so tensor operands are cast to it first; comparisons run in the promoted dtype
of their operands.
"""

from __future__ import annotations

import math

import torch

from .lowering import aten, cast, identity, is_te, ops, out_dtype, register, te_dtype


def _promoted(ctx, node, a, b) -> torch.dtype:
    """torch's result dtype of (a, b) for comparisons: a and b are the FX arguments."""
    def example(x):
        if hasattr(x, "op"):  # an FX node
            m = ctx.concrete[x]
            if hasattr(m, "dtype"):
                return torch.empty(m.shape, dtype=m.dtype, device="meta")
            return m
        return x
    return torch.result_type(example(a), example(b))


# ---- arithmetic ---------------------------------------------------------------------------

def _arith(name):
    f = getattr(ops, name)

    def lower(ctx, node, a, b, alpha=1):
        dt = out_dtype(ctx, node)
        a, b = cast(a, dt), cast(b, dt)
        if alpha != 1:
            b = ops.mul(b, float(alpha)) if is_te(b) else b * alpha
        return f(a, b)
    return lower


register([aten.add.Tensor, aten.add.Scalar], "elementwise")(_arith("add"))
register([aten.sub.Tensor, aten.sub.Scalar], "elementwise")(_arith("sub"))
register([aten.mul.Tensor, aten.mul.Scalar], "elementwise")(_arith("mul"))
register([aten.maximum.default], "elementwise")(_arith("maximum"))
register([aten.minimum.default], "elementwise")(_arith("minimum"))


@register([aten.rsub.Scalar, aten.rsub.Tensor], "elementwise")
def _rsub(ctx, node, a, b, alpha=1):
    dt = out_dtype(ctx, node)
    a, b = cast(a, dt), cast(b, dt)
    if alpha != 1:
        a = ops.mul(a, float(alpha))
    return ops.sub(b, a)


def _float_result(node, metas):
    m = metas[node]
    return None if m.dtype == torch.float32 else f"result dtype {m.dtype}"


@register([aten.div.Tensor, aten.div.Scalar], "elementwise", check=_float_result)
def _div(ctx, node, a, b):
    dt = out_dtype(ctx, node)
    return ops.div(cast(a, dt), cast(b, dt))


def _pow_check(node, metas):
    return _float_result(node, metas)


@register([aten.pow.Tensor_Scalar], "elementwise", check=_pow_check)
def _pow_ts(ctx, node, x, e):
    x = cast(x, out_dtype(ctx, node))
    if e == 2:
        return ops.mul(x, x)
    if e == 1:
        return identity(x)
    if e == 0.5:
        return ops.sqrt(x)
    if e == -0.5:
        return ops.rsqrt(x)
    if e == 3:
        return ops.mul(ops.mul(x, x), x)
    if e == -1:
        return ops.div(1.0, x)
    return ops.pow(x, float(e))


@register([aten.pow.Tensor_Tensor, aten.pow.Scalar], "elementwise", check=_pow_check)
def _pow(ctx, node, a, b):
    dt = out_dtype(ctx, node)
    return ops.pow(cast(a, dt), cast(b, dt))


# ---- unary --------------------------------------------------------------------------------

def _unary(name, float_only=True):
    f = getattr(ops, name)

    def lower(ctx, node, x):
        return f(cast(x, out_dtype(ctx, node)))
    return lower, (_float_result if float_only else None)


for _target, _name, _float in [
    (aten.neg.default, "neg", False), (aten.abs.default, "abs", False),
    (aten.relu.default, "relu", False), (aten.tanh.default, "tanh", True),
    (aten.exp.default, "exp", True), (aten.log.default, "log", True),
    (aten.sqrt.default, "sqrt", True), (aten.rsqrt.default, "rsqrt", True),
    (aten.sigmoid.default, "sigmoid", True), (aten.erf.default, "erf", True),
    (aten.floor.default, "floor", True), (aten.ceil.default, "ceil", True),
]:
    _fn, _check = _unary(_name, _float)
    register([_target], "elementwise", check=_check)(_fn)


@register([aten.reciprocal.default], "elementwise", check=_float_result)
def _reciprocal(ctx, node, x):
    return ops.div(1.0, cast(x, torch.float32))


@register([aten.sign.default], "elementwise")
def _sign(ctx, node, x):
    # (x > 0) - (x < 0) in x's dtype: NaN and -0.0 give +0 as in torch; a bool stays itself.
    dt = out_dtype(ctx, node)
    if dt == torch.bool:
        return identity(x)
    pos = ops.cast(ops.compare(x, 0.0, "gt"), te_dtype(dt))
    neg = ops.cast(ops.compare(x, 0.0, "lt"), te_dtype(dt))
    return ops.sub(pos, neg)


@register([aten.gelu.default], "elementwise", check=_float_result)
def _gelu(ctx, node, x, approximate="none"):
    if approximate == "none":
        return ops.gelu(x)
    # tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    inner = ops.mul(ops.add(x, ops.mul(ops.mul(ops.mul(x, x), x), 0.044715)),
                    math.sqrt(2.0 / math.pi))
    return ops.mul(ops.mul(x, 0.5), ops.add(ops.tanh(inner), 1.0))


@register([aten.gelu_backward.default], "elementwise",
          check=lambda n, m: _float_result(n, m) or (
              None if n.kwargs.get("approximate", "none") == "none" else "tanh gelu backward"))
def _gelu_backward(ctx, node, g, x, approximate="none"):
    cdf = ops.mul(ops.add(ops.erf(ops.mul(x, 1.0 / math.sqrt(2.0))), 1.0), 0.5)
    pdf = ops.mul(ops.exp(ops.mul(ops.mul(x, x), -0.5)), 1.0 / math.sqrt(2.0 * math.pi))
    return ops.mul(g, ops.add(cdf, ops.mul(x, pdf)))


@register([aten.silu.default], "elementwise", check=_float_result)
def _silu(ctx, node, x):
    return ops.mul(x, ops.sigmoid(x))


@register([aten.hardswish.default], "elementwise", check=_float_result)
def _hardswish(ctx, node, x):
    return ops.mul(x, ops.mul(ops.clamp(ops.add(x, 3.0), 0.0, 6.0), 1.0 / 6.0))


@register([aten.hardsigmoid.default], "elementwise", check=_float_result)
def _hardsigmoid(ctx, node, x):
    return ops.clamp(ops.add(ops.mul(x, 1.0 / 6.0), 0.5), 0.0, 1.0)


@register([aten.hardtanh.default], "elementwise", check=_float_result)
def _hardtanh(ctx, node, x, lo=-1.0, hi=1.0):
    return ops.clamp(x, float(lo), float(hi))


@register([aten.leaky_relu.default], "elementwise", check=_float_result)
def _leaky_relu(ctx, node, x, slope=0.01):
    return ops.where(ops.compare(x, 0.0, "gt"), x, ops.mul(x, float(slope)))


def _clamp_check(node, metas):
    m = metas[node]
    if m.dtype == torch.bool:
        return "clamp of a bool tensor"
    bounds = [a for a in node.args[1:] if a is not None]
    if m.dtype != torch.float32 and any(isinstance(b, float) and not b.is_integer()
                                        for b in bounds):
        return "fractional bound on an integer tensor"
    return None


@register([aten.clamp.default], "elementwise", check=_clamp_check)
def _clamp(ctx, node, x, lo=None, hi=None):
    # Integer tensors take integer bounds exactly: make_const converts them to the tensor's
    # dtype, so clamp(ids, 0, n - 1) stays an int64 computation.
    x = cast(x, out_dtype(ctx, node))
    return ops.clamp(x, None if lo is None else float(lo), None if hi is None else float(hi))


@register([aten.clamp_min.default], "elementwise", check=_clamp_check)
def _clamp_min(ctx, node, x, lo):
    return ops.clamp(cast(x, out_dtype(ctx, node)), float(lo), None)


@register([aten.clamp_max.default], "elementwise", check=_clamp_check)
def _clamp_max(ctx, node, x, hi):
    return ops.clamp(cast(x, out_dtype(ctx, node)), None, float(hi))


def _clamp_tensor_check(node, metas):
    m = metas[node]
    return "clamp of a bool tensor" if m.dtype == torch.bool else None


def _clamp_tensors(ctx, node, x, lo, hi):
    """min(max(x, lo), hi) in the result dtype: NaN anywhere gives NaN and lo > hi gives hi,
    as torch (maximum/minimum propagate NaN)."""
    dt = out_dtype(ctx, node)
    out = cast(x, dt)
    if lo is not None:
        out = ops.maximum(out, _as_tensor(cast(lo, dt), dt))
    if hi is not None:
        out = ops.minimum(out, _as_tensor(cast(hi, dt), dt))
    return out if (lo is not None or hi is not None) else identity(out)


register([aten.clamp.Tensor], "elementwise", check=_clamp_tensor_check)(
    lambda ctx, node, x, lo=None, hi=None: _clamp_tensors(ctx, node, x, lo, hi))
register([aten.clamp_min.Tensor], "elementwise", check=_clamp_tensor_check)(
    lambda ctx, node, x, lo: _clamp_tensors(ctx, node, x, lo, None))
register([aten.clamp_max.Tensor], "elementwise", check=_clamp_tensor_check)(
    lambda ctx, node, x, hi: _clamp_tensors(ctx, node, x, None, hi))


# ---- backward pointwise -------------------------------------------------------------------

@register([aten.threshold_backward.default], "elementwise", check=_float_result)
def _threshold_backward(ctx, node, g, x, threshold):
    zero = ops.full([], 0.0, "float32")
    return ops.where(ops.compare(x, float(threshold), "le"), zero, g)


@register([aten.sigmoid_backward.default], "elementwise", check=_float_result)
def _sigmoid_backward(ctx, node, g, y):
    return ops.mul(g, ops.mul(y, ops.sub(1.0, y)))


@register([aten.tanh_backward.default], "elementwise", check=_float_result)
def _tanh_backward(ctx, node, g, y):
    return ops.mul(g, ops.sub(1.0, ops.mul(y, y)))


@register([aten.hardtanh_backward.default], "elementwise", check=_float_result)
def _hardtanh_backward(ctx, node, g, x, lo, hi):
    zero = ops.full([], 0.0, "float32")
    outside = ops.logical_or(ops.compare(x, float(lo), "le"), ops.compare(x, float(hi), "ge"))
    return ops.where(outside, zero, g)


# ---- comparisons, logic, selection --------------------------------------------------------

def _compare(cmp):
    def lower(ctx, node, a, b):
        dt = _promoted(ctx, node, node.args[0], node.args[1])
        a, b = cast(a, dt), cast(b, dt)
        if not is_te(a):  # scalar <cmp> tensor never appears in ATen; keep it total anyway
            flipped = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}.get(cmp, cmp)
            return ops.compare(b, float(a), flipped)
        return ops.compare(a, b if is_te(b) else float(b), cmp)
    return lower


for _cmp in ("eq", "ne", "lt", "le", "gt", "ge"):
    register([getattr(aten, _cmp).Tensor, getattr(aten, _cmp).Scalar], "elementwise")(
        _compare(_cmp))


def _bool_only(node, metas):
    for a in node.args:
        m = metas.get(a) if hasattr(a, "op") else None
        if m is not None and getattr(m, "dtype", torch.bool) != torch.bool:
            return f"bitwise op on {m.dtype}: the IR has no bitwise integer operators"
    return None


register([aten.logical_and.default], "elementwise")(
    lambda ctx, node, a, b: ops.logical_and(a, b))
register([aten.logical_or.default], "elementwise")(lambda ctx, node, a, b: ops.logical_or(a, b))
register([aten.logical_not.default], "elementwise")(lambda ctx, node, x: ops.logical_not(x))
register([aten.bitwise_and.Tensor], "elementwise", check=_bool_only)(
    lambda ctx, node, a, b: ops.logical_and(a, b))
register([aten.bitwise_or.Tensor], "elementwise", check=_bool_only)(
    lambda ctx, node, a, b: ops.logical_or(a, b))
register([aten.bitwise_not.default], "elementwise", check=_bool_only)(
    lambda ctx, node, x: ops.logical_not(x))
register([aten.bitwise_xor.Tensor], "elementwise", check=_bool_only)(
    lambda ctx, node, a, b: ops.compare(a, b, "ne"))


@register([aten.logical_xor.default], "elementwise")
def _logical_xor(ctx, node, a, b):
    # Truth values first (any non-zero, NaN included, is true), then "differ".
    return ops.compare(ops.logical_not(a), ops.logical_not(b), "ne")


def _as_tensor(x, dtype):
    return x if is_te(x) else ops.full([], float(x), te_dtype(dtype))


@register([aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar],
          "elementwise")
def _where(ctx, node, c, a, b):
    dt = out_dtype(ctx, node)
    return ops.where(c, _as_tensor(cast(a, dt), dt), _as_tensor(cast(b, dt), dt))


@register([aten.masked_fill.Scalar, aten.masked_fill.Tensor], "elementwise")
def _masked_fill(ctx, node, x, mask, value):
    dt = out_dtype(ctx, node)
    return ops.where(mask, _as_tensor(cast(value, dt), dt), cast(x, dt))


def _to_copy_check(node, metas):
    dev = node.kwargs.get("device")
    if dev is not None and torch.device(dev).type != "cpu":
        return "device copy"
    return None


@register([aten._to_copy.default], "elementwise", check=_to_copy_check)
def _to_copy(ctx, node, x, **kwargs):
    return identity(cast(x, out_dtype(ctx, node)))


@register([aten.lift_fresh_copy.default], "elementwise")
def _lift_fresh_copy(ctx, node, x):
    # A copy of a constant tensor captured by the traced code (torch.tensor(...) in forward).
    return identity(x)


@register([aten.clone.default], "elementwise")
def _clone(ctx, node, x, memory_format=None):
    # Classified "view" when nobody can observe the copy (Classifier._clone_is_a_view): then
    # the value itself. Otherwise a real copy.
    return x if ctx.kind_of(node) == "view" else identity(x)


# ---- sources: tensors that read no input data ---------------------------------------------

def _full_of(ctx, node, value):
    m = ctx.meta(node)
    return ops.full(list(m.shape), float(value), te_dtype(m.dtype))


register([aten.full.default], "source")(
    lambda ctx, node, size, value, **kw: _full_of(ctx, node, value))
register([aten.full_like.default], "source")(
    lambda ctx, node, x, value, **kw: _full_of(ctx, node, value))
register([aten.scalar_tensor.default], "source")(
    lambda ctx, node, value, **kw: _full_of(ctx, node, value))
register([aten.zeros_like.default, aten.new_zeros.default], "source")(
    lambda ctx, node, *a, **kw: _full_of(ctx, node, 0))
register([aten.ones_like.default, aten.new_ones.default], "source")(
    lambda ctx, node, *a, **kw: _full_of(ctx, node, 1))
register([aten.zeros.default], "source")(lambda ctx, node, *a, **kw: _full_of(ctx, node, 0))
register([aten.ones.default], "source")(lambda ctx, node, *a, **kw: _full_of(ctx, node, 1))
register([aten.new_full.default], "source")(
    lambda ctx, node, x, size, value, **kw: _full_of(ctx, node, value))


@register([aten.arange.default, aten.arange.start, aten.arange.start_step], "source")
def _arange(ctx, node, *args, **kwargs):
    m = ctx.meta(node)
    if len(args) == 1:
        start, step = 0, 1
    else:
        start = args[0]
        step = args[2] if len(args) > 2 else kwargs.get("step", 1)
    return ops.arange(int(m.shape[0]), float(start), float(step), te_dtype(m.dtype))
