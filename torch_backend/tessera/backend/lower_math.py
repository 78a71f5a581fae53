"""Lowerings of float math functions that the code generator has no call for (sin, cos, tan,
asin, acos, atan, sinh, cosh, exp2, expm1, log1p, log2, log10, erfinv, round, trunc), composed
from the operators it has.

Each function reads its float32 input, computes in float64 and rounds once to float32 at the
end: float64 has 29 spare bits, so identities that lose a few bits (log2 = log / ln 2,
expm1 = exp - 1 away from zero, reductions and polynomials) still give the correctly rounded
float32 result in all but rare ties, i.e. agree with torch to ~1 ulp. float64 exp, log, sqrt and
erf are libm's (csrc/codegen/llvm/emit_expr.cc). Integer and bool inputs are first converted to
float32, as torch does before the math.

Special values follow torch: NaN propagates, sin/cos/tan of +-inf is NaN, log1p(-1) = -inf,
expm1(-inf) = -1, -0.0 keeps its sign where torch keeps it (sin, tan, asin, atan, sinh, expm1,
log1p, round, trunc, erfinv).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import List

import torch

from .lowering import aten, cast, ops, out_dtype, register

F64 = "float64"


def _float_result(node, metas):
    m = metas[node]
    return None if m.dtype == torch.float32 else f"result dtype {m.dtype}"


def _in64(ctx, node, x):
    """x as float64, after torch's conversion of the input to the float32 result type."""
    return ops.cast(cast(x, out_dtype(ctx, node)), F64)


def _out(ctx, node, d):
    """The float64 result rounded once to the node's float32."""
    return ops.cast(d, "float32")


def _c(value: float):
    return ops.full([], float(value), F64)


def _keep_zero(d, r):
    """r, except where d is +-0 (then d itself: keeps -0.0 as torch does)."""
    return ops.where(ops.compare(d, 0.0, "eq"), d, r)


def _horner(z, coeffs: List[float]):
    """coeffs[0] + z * (coeffs[1] + z * (...))."""
    acc = _c(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = ops.add(ops.mul(acc, z), c)
    return acc


# ---- sin, cos, tan: exact argument reduction --------------------------------------------------

def _pi_fraction(bits: int) -> Fraction:
    """pi to `bits` bits (Machin's formula in integers)."""
    scale = 1 << (bits + 16)

    def arctan_inv(n: int) -> int:
        total, term, k, n2 = 0, scale // n, 1, n * n
        while term:
            total += term // k if (k // 2) % 2 == 0 else -(term // k)
            term //= n2
            k += 2
        return total
    return Fraction(16 * arctan_inv(5) - 4 * arctan_inv(239), scale)


def _two_over_pi_chunks(count: int = 8, width: int = 24) -> List[float]:
    """2/pi as `count` chunks of `width` bits: chunk i = integer * 2^-(width (i + 1)). Each is
    exact in float64, and so is its product with any float32 (24 x 24 bits)."""
    rest = Fraction(2) / _pi_fraction(count * width + 64)
    out = []
    for i in range(count):
        scaled = rest * (1 << (width * (i + 1)))
        whole = scaled.numerator // scaled.denominator
        out.append(math.ldexp(whole, -width * (i + 1)))
        rest -= Fraction(whole, 1 << (width * (i + 1)))
    return out


# 8 chunks (192 bits) cover float32's whole range: for |x| < 2^128 the terms past the last
# chunk are below 2^-64 quadrants.
_TWO_OVER_PI = _two_over_pi_chunks()


def _mod4_parts(t):
    """(q, f) with t = 4k + q + f: q an integer in [0, 4), f in [-0.5, 0.5], both exact.
    n = floor(t + 0.5) is an integer within 1 of t, so t - n (t's fraction, or it minus one)
    is exact; n mod 4 is integer arithmetic, exact at any size."""
    n = ops.floor(ops.add(t, 0.5))
    q = ops.sub(n, ops.mul(ops.floor(ops.mul(n, 0.25)), 4.0))
    return q, ops.sub(t, n)


def _reduce(d):
    """(q, r) with x = (4k + q) * pi/2 + r, q in {0, 1, 2, 3}, |r| <= pi/4 (+ rounding).

    Payne-Hanek style: x * 2/pi mod 4 is the sum of x * chunk_i mod 4, each product exact, each
    split exactly into integer and fraction; only the fractions (all |.| <= 0.5, partial sums
    kept there) are rounded, so r's absolute error stays ~1e-16 for every float32 x."""
    quadrant = None
    frac = None
    for chunk in reversed(_TWO_OVER_PI):  # small terms first
        n, f = _mod4_parts(ops.mul(d, chunk))
        quadrant = n if quadrant is None else ops.add(quadrant, n)
        frac = f if frac is None else ops.add(frac, f)
        carry = ops.floor(ops.add(frac, 0.5))
        frac = ops.sub(frac, carry)
        quadrant = ops.add(quadrant, carry)
    q = ops.sub(quadrant, ops.mul(ops.floor(ops.mul(quadrant, 0.25)), 4.0))
    return q, ops.mul(frac, math.pi / 2)


# Taylor coefficients; on |r| <= pi/4 the first omitted terms are below 1e-11 (sin) and 1e-12
# (cos) relative, far below float32's 6e-8.
_SIN = [(-1) ** k / math.factorial(2 * k + 1) for k in range(6)]   # r * P(r^2), to r^11
_COS = [(-1) ** k / math.factorial(2 * k) for k in range(7)]       # P(r^2), to r^12


def _sin_cos_reduced(r):
    z = ops.mul(r, r)
    return ops.mul(r, _horner(z, _SIN)), _horner(z, _COS)


def _by_quadrant(q, v0, v1, v2, v3):
    return ops.where(ops.compare(q, 0.0, "eq"), v0,
                     ops.where(ops.compare(q, 1.0, "eq"), v1,
                               ops.where(ops.compare(q, 2.0, "eq"), v2, v3)))


def _reduced_sin_cos(ctx, node, x):
    """(d, q, sin r, cos r) for x: x as float64, its quadrant q and reduced argument r. Computed
    once per input in a partition (a rotary embedding takes sin and cos of one tensor)."""
    key = ("sin_cos", node.args[0])
    if key not in ctx.shared:
        d = _in64(ctx, node, x)
        q, r = _reduce(d)
        ctx.shared[key] = (d, q) + _sin_cos_reduced(r)
    return ctx.shared[key]


@register([aten.sin.default], "elementwise", check=_float_result)
def _sin(ctx, node, x):
    d, q, s, c = _reduced_sin_cos(ctx, node, x)
    return _out(ctx, node, _keep_zero(d, _by_quadrant(q, s, c, ops.neg(s), ops.neg(c))))


@register([aten.cos.default], "elementwise", check=_float_result)
def _cos(ctx, node, x):
    _, q, s, c = _reduced_sin_cos(ctx, node, x)
    return _out(ctx, node, _by_quadrant(q, c, ops.neg(s), ops.neg(c), s))


@register([aten.tan.default], "elementwise", check=_float_result)
def _tan(ctx, node, x):
    d, q, s, c = _reduced_sin_cos(ctx, node, x)
    even = ops.logical_or(ops.compare(q, 0.0, "eq"), ops.compare(q, 2.0, "eq"))
    return _out(ctx, node, _keep_zero(d, ops.where(even, ops.div(s, c),
                                                   ops.neg(ops.div(c, s)))))


# ---- atan, asin, acos ---------------------------------------------------------------------------

# atan(u) = u * P(u^2) for |u| <= tan(pi/16) ~ 0.199: terms to u^19, omitted ones < 1e-14.
_ATAN = [(-1) ** k / (2 * k + 1) for k in range(10)]


def _atan64(d):
    """atan in float64: |x| > 1 reflected through pi/2 - atan(1/|x|), then the angle halved
    twice (atan u = 2 atan(u / (1 + sqrt(1 + u^2)))) before the series."""
    a = ops.abs(d)
    big = ops.compare(a, 1.0, "gt")
    u = ops.where(big, ops.div(1.0, a), a)
    for _ in range(2):
        u = ops.div(u, ops.add(ops.sqrt(ops.add(ops.mul(u, u), 1.0)), 1.0))
    t = ops.mul(ops.mul(u, _horner(ops.mul(u, u), _ATAN)), 4.0)
    t = ops.where(big, ops.sub(math.pi / 2, t), t)
    return _keep_zero(d, ops.where(ops.compare(d, 0.0, "lt"), ops.neg(t), t))


def _asin64(d):
    # x / sqrt(1 - x^2): +-inf at |x| = 1 (atan gives +-pi/2), NaN beyond (as torch).
    return _atan64(ops.div(d, ops.sqrt(ops.sub(1.0, ops.mul(d, d)))))


@register([aten.atan.default], "elementwise", check=_float_result)
def _atan(ctx, node, x):
    return _out(ctx, node, _atan64(_in64(ctx, node, x)))


@register([aten.asin.default], "elementwise", check=_float_result)
def _asin(ctx, node, x):
    return _out(ctx, node, _asin64(_in64(ctx, node, x)))


@register([aten.acos.default], "elementwise", check=_float_result)
def _acos(ctx, node, x):
    return _out(ctx, node, ops.sub(math.pi / 2, _asin64(_in64(ctx, node, x))))


# ---- exponentials and logarithms ------------------------------------------------------------

def _expm1_64(d):
    # |x| < 1e-5: x + x^2/2 + x^3/6 (next term < 1e-21 relative); else exp(x) - 1, whose
    # cancellation costs < 1e-11 relative there.
    small = ops.compare(ops.abs(d), 1e-5, "lt")
    series = ops.mul(d, _horner(d, [1.0, 0.5, 1.0 / 6.0]))
    return ops.where(small, series, ops.sub(ops.exp(d), 1.0))


@register([aten.expm1.default], "elementwise", check=_float_result)
def _expm1(ctx, node, x):
    return _out(ctx, node, _expm1_64(_in64(ctx, node, x)))


@register([aten.exp2.default], "elementwise", check=_float_result)
def _exp2(ctx, node, x):
    return _out(ctx, node, ops.exp(ops.mul(_in64(ctx, node, x), math.log(2.0))))


@register([aten.log1p.default], "elementwise", check=_float_result)
def _log1p(ctx, node, x):
    # |x| < 1e-4: x - x^2/2 + x^3/3 - x^4/4 (next term < 1e-16 relative); else log(1 + x),
    # where 1 + x rounds by < 1.2e-16, i.e. < 1e-12 relative to log1p(x).
    d = _in64(ctx, node, x)
    small = ops.compare(ops.abs(d), 1e-4, "lt")
    series = ops.mul(d, _horner(d, [1.0, -0.5, 1.0 / 3.0, -0.25]))
    return _out(ctx, node, ops.where(small, series, ops.log(ops.add(d, 1.0))))


def _log_scaled(scale):
    def lower(ctx, node, x):
        return _out(ctx, node, ops.mul(ops.log(_in64(ctx, node, x)), scale))
    return lower


register([aten.log2.default], "elementwise", check=_float_result)(_log_scaled(1 / math.log(2)))
register([aten.log10.default], "elementwise", check=_float_result)(
    _log_scaled(1 / math.log(10)))


@register([aten.sinh.default], "elementwise", check=_float_result)
def _sinh(ctx, node, x):
    # |x| < 1e-4: x + x^3/6 (next term < 1e-18 relative); else (e^x - e^-x) / 2.
    d = _in64(ctx, node, x)
    small = ops.compare(ops.abs(d), 1e-4, "lt")
    series = ops.add(d, ops.mul(ops.mul(ops.mul(d, d), d), 1.0 / 6.0))
    wide = ops.mul(ops.sub(ops.exp(d), ops.exp(ops.neg(d))), 0.5)
    return _out(ctx, node, ops.where(small, series, wide))


@register([aten.cosh.default], "elementwise", check=_float_result)
def _cosh(ctx, node, x):
    d = _in64(ctx, node, x)
    return _out(ctx, node, ops.mul(ops.add(ops.exp(d), ops.exp(ops.neg(d))), 0.5))


# ---- erfinv -------------------------------------------------------------------------------------

# Giles' single-precision erfinv ("Approximating the erfinv function", GPU Computing Gems, 2011):
# the start for two Newton steps on erf(y) = x in float64.
_GILES_CENTRAL = [1.50140941, 0.246640727, -0.00417768164, -0.00125372503, 0.00021858087,
                  -4.39150654e-06, -3.5233877e-06, 3.43273939e-07, 2.81022636e-08]
_GILES_TAIL = [2.83297682, 1.00167406, 0.00943887047, -0.0076224613, 0.00573950773,
               -0.00367342844, 0.00134934322, 0.000100950558, -0.000200214257]


@register([aten.erfinv.default], "elementwise", check=_float_result)
def _erfinv(ctx, node, x):
    d = _in64(ctx, node, x)
    w = ops.neg(ops.log(ops.mul(ops.sub(1.0, d), ops.add(d, 1.0))))
    central = _horner(ops.sub(w, 2.5), _GILES_CENTRAL)
    tail = _horner(ops.sub(ops.sqrt(w), 3.0), _GILES_TAIL)
    y = ops.mul(ops.where(ops.compare(w, 5.0, "lt"), central, tail), d)
    slope = 2.0 / math.sqrt(math.pi)
    for _ in range(2):
        step = ops.div(ops.sub(ops.erf(y), d), ops.mul(ops.exp(ops.neg(ops.mul(y, y))), slope))
        y = ops.sub(y, step)
    # |x| = 1: +-inf (the Newton step would divide 0 by 0); |x| > 1 is NaN through the log.
    edge = ops.compare(ops.abs(d), 1.0, "eq")
    return _out(ctx, node, ops.where(edge, ops.mul(d, math.inf), y))


# ---- rounding -----------------------------------------------------------------------------

def _int_identity_or(float_fn):
    """Rounding of integer (and bool) tensors is the identity in torch, in their own dtype."""
    def lower(ctx, node, x):
        dt = out_dtype(ctx, node)
        if dt != torch.float32:
            return ops.permute(x, list(range(len(x.shape))))  # a computed copy
        return float_fn(ctx, node, x)
    return lower


def _float_or_int(node, metas):
    m = metas[node]
    return None if m.dtype in (torch.float32, torch.int64, torch.int32) else \
        f"result dtype {m.dtype}"


def _round_float(ctx, node, x):
    # Half to even, as torch: floor(x + 0.5) (exact in float64), one down at odd ties; a zero
    # result takes x's sign (round(-0.3) = -0.0).
    d = _in64(ctx, node, x)
    r = ops.floor(ops.add(d, 0.5))
    tie = ops.compare(ops.sub(r, d), 0.5, "eq")
    odd = ops.compare(ops.sub(r, ops.mul(ops.floor(ops.mul(r, 0.5)), 2.0)), 1.0, "eq")
    r = ops.where(ops.logical_and(tie, odd), ops.sub(r, 1.0), r)
    return _out(ctx, node, ops.where(ops.compare(r, 0.0, "eq"), ops.mul(d, 0.0), r))


def _trunc_float(ctx, node, x):
    x = cast(x, torch.float32)
    return ops.where(ops.compare(x, 0.0, "lt"), ops.ceil(x), ops.floor(x))


register([aten.round.default], "elementwise", check=_float_or_int)(
    _int_identity_or(_round_float))
register([aten.trunc.default], "elementwise", check=_float_or_int)(
    _int_identity_or(_trunc_float))


__all__: List[str] = []
