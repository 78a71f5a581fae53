"""Lowerings of rounding divisions and remainders with torch's exact semantics:
div(rounding_mode="floor" | "trunc") (what `//` and floor_divide decompose to), remainder
(Python's %: the divisor's sign) and fmod (C's: the dividend's sign), for integer and float32
tensors.

Integers use the IR's floor division and modulo (ops.floordiv / ops.floormod): a zero divisor
raises ZeroDivisionError from the kernel, as torch raises for integer division by zero.

Floats reproduce ATen's CPU kernels step by step (c10/util/generic_math.h div_floor_floating,
ATen's remainder kernel): the remainder comes from an exact fmod, every other step is the same
float32 operation ATen does, so results match bit for bit, including signed zeros, infinities
and NaN.
"""

from __future__ import annotations

import torch

from .lowering import aten, cast, is_te, ops, out_dtype, register, te_dtype

_INTS = (torch.int32, torch.int64)


def _result_check(node, metas):
    m = metas[node]
    return None if m.dtype in _INTS + (torch.float32,) else f"result dtype {m.dtype}"


def _operands(ctx, node, a, b):
    """a and b as tensors of the node's result dtype (scalars become 0-d constants)."""
    dt = out_dtype(ctx, node)

    def as_tensor(v):
        return cast(v, dt) if is_te(v) else ops.full([], float(v), te_dtype(dt))
    return as_tensor(a), as_tensor(b), dt


def _neg(x):
    return ops.compare(x, 0.0, "lt")


def _signs_differ(x, y):
    return ops.compare(_neg(x), _neg(y), "ne")


# ---- exact float fmod ---------------------------------------------------------------------

def _trunc(q):
    return ops.where(_neg(q), ops.ceil(q), ops.floor(q))


def _fmod_float(a, b):
    """C's fmod of float32 tensors (what ATen's scalar path gives), exact, for |a / b| <
    2^140; beyond that NaN. ATen's vectorised path gives NaN already where a / b overflows
    float32 (2^128), so the two agree everywhere except quotients in [2^128, 2^140).

    Exact in float64: |a| is reduced by |b| * 2^(28 s) for s = 4 .. 0. Every quotient is below
    2^28, so it (truncated through int64: one use of the partial remainder, not three) and its
    product with the 24-bit divisor are exact, and so is each partial remainder (an fmod of
    float32-mantissa numbers). Five steps cover every quotient below 2^140 > float32's range.
    fmod(x, +-inf) = x for finite x; a zero result has x's sign."""
    a64, b64 = ops.cast(a, "float64"), ops.cast(b, "float64")
    m = ops.abs(b64)
    r = a64
    for s in reversed(range(5)):
        ms = ops.mul(m, float(2 ** (28 * s)))
        # Where the quotient is not finite (b = 0, a = +-inf, NaN) the int64 value is
        # meaningless; those lanes are replaced below.
        whole = ops.cast(ops.cast(ops.div(r, ms), "int64"), "float64")
        r = ops.sub(r, ops.mul(whole, ms))
    r = ops.where(ops.compare(r, 0.0, "eq"), ops.mul(a64, 0.0), r)
    finite_a = ops.compare(ops.abs(a64), float("inf"), "lt")
    in_range = ops.compare(ops.abs(a64), ops.mul(m, float(2 ** 140)), "lt")
    defined = ops.logical_and(finite_a, ops.logical_and(ops.compare(m, 0.0, "gt"), in_range))
    nan = ops.full([], float("nan"), "float64")
    keep_a = ops.logical_and(ops.compare(m, float("inf"), "eq"), finite_a)
    return ops.cast(ops.where(keep_a, a64, ops.where(defined, r, nan)), "float32")


# ---- integer helpers ----------------------------------------------------------------------

def _fmod_int(a, b):
    r = ops.floormod(a, b)
    fix = ops.logical_and(ops.compare(r, 0.0, "ne"), _signs_differ(r, a))
    return ops.where(fix, ops.sub(r, b), r)


def _trunc_div_int(a, b):
    q = ops.floordiv(a, b)
    inexact = ops.compare(ops.floormod(a, b), 0.0, "ne")
    return ops.where(ops.logical_and(inexact, _signs_differ(a, b)), ops.add(q, 1.0), q)


# ---- float floor division as ATen computes it -----------------------------------------------

def _floor_div_float(a, b):
    """div_floor_floating: a / b for b == 0; else (a - fmod) / b, one less when fmod's sign
    differs from b's, floored and rounded up when over a half away; a zero takes a / b's
    sign."""
    mod = _fmod_float(a, b)
    div = ops.div(ops.sub(a, mod), b)
    fix = ops.logical_and(ops.compare(mod, 0.0, "ne"), _signs_differ(b, mod))
    div = ops.where(fix, ops.sub(div, 1.0), div)
    floored = ops.floor(div)
    floored = ops.where(ops.compare(ops.sub(div, floored), 0.5, "gt"),
                        ops.add(floored, 1.0), floored)
    q = ops.div(a, b)
    negative_q = ops.compare(ops.div(1.0, q), 0.0, "lt")  # q < 0 or q == -0.0
    zero = ops.where(negative_q, ops.full([], -0.0, "float32"), ops.full([], 0.0, "float32"))
    result = ops.where(ops.compare(div, 0.0, "ne"), floored, zero)
    # b == 0: a / b itself. A quotient beyond float32 (finite a): ATen's steps give +-inf,
    # which a / b is (the exact fmod above is NaN for such quotients).
    overflow = ops.logical_and(ops.compare(ops.abs(q), float("inf"), "eq"),
                               ops.compare(ops.abs(a), float("inf"), "lt"))
    return ops.where(ops.logical_or(ops.compare(b, 0.0, "eq"), overflow), q, result)


def _div_check(node, metas):
    mode = node.kwargs.get("rounding_mode", node.args[2] if len(node.args) > 2 else None)
    m = metas[node]
    if mode is None:
        return None if m.dtype == torch.float32 else f"result dtype {m.dtype}"
    return _result_check(node, metas)


@register([aten.div.Tensor_mode, aten.div.Scalar_mode], "elementwise", check=_div_check)
def _div_mode(ctx, node, a, b, rounding_mode=None):
    a, b, dt = _operands(ctx, node, a, b)
    if rounding_mode is None:
        return ops.div(a, b)
    if dt in _INTS:
        return ops.floordiv(a, b) if rounding_mode == "floor" else _trunc_div_int(a, b)
    if rounding_mode == "floor":
        return _floor_div_float(a, b)
    return _trunc(ops.div(a, b))  # trunc(a / b) in float32, as ATen's div_trunc


@register([aten.remainder.Tensor, aten.remainder.Scalar], "elementwise", check=_result_check)
def _remainder(ctx, node, a, b):
    a, b, dt = _operands(ctx, node, a, b)
    if dt in _INTS:
        return ops.floormod(a, b)
    mod = _fmod_float(a, b)
    fix = ops.logical_and(ops.compare(mod, 0.0, "ne"), _signs_differ(b, mod))
    return ops.where(fix, ops.add(mod, b), mod)


@register([aten.fmod.Tensor, aten.fmod.Scalar], "elementwise", check=_result_check)
def _fmod(ctx, node, a, b):
    a, b, dt = _operands(ctx, node, a, b)
    return _fmod_int(a, b) if dt in _INTS else _fmod_float(a, b)


__all__ = []
