"""The lowerings of math, rounding, division, logic, clamp, where and indexing operators
(backend/lower_math.py, lower_division.py, lower_elementwise.py, lower_shape.py) against eager
PyTorch, on values chosen for their edge cases: signed zeros, infinities, NaN, ties, tiny and
huge magnitudes, negative operands.

Each test compiles one function computing several operators (one compile per group keeps the
suite fast) with anchor_measure off, so Tessera's kernels run, and checks that none of the
operators fell back to ATen.
"""

import pytest
import torch

import tessera  # noqa: F401
from tessera.backend import last_serial, recent_summaries

KERNELS = {"anchor_measure": False, "fallback": False, "records_db": False}


def compiled_results(fn, *args):
    """(compiled outputs, eager outputs, ATen ops the compiled graphs ran)."""
    torch._dynamo.reset()
    since = last_serial()
    compiled = torch.compile(fn, backend="tessera", options=KERNELS)
    compiled(*args)  # first call: records shapes, runs eagerly, compiles
    got = compiled(*args)
    aten = {}
    for s in recent_summaries(since):
        aten.update(s.aten_ops)
    return got, fn(*args), aten


def assert_same(name, got, want):
    """Bit-for-bit equal values, signed zeros included (NaN matches NaN)."""
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype} != {want.dtype}"
    if got.is_floating_point():
        nan = torch.isnan(want)
        assert torch.equal(torch.isnan(got), nan), f"{name}: NaN positions differ"
        g, w = got[~nan], want[~nan]
        bad = (g != w) | (torch.signbit(g) != torch.signbit(w))
        assert not bad.any(), f"{name}: {g[bad][:6].tolist()} != {w[bad][:6].tolist()}"
    else:
        assert torch.equal(got, want), f"{name}: {got.tolist()} != {want.tolist()}"


def assert_ulps(name, got, want, rel=2.5e-7):
    """Within ~2 float32 ulps (both sides round float64-accurate results; torch's own
    vectorised math is within 1 ulp), same NaN/inf positions, same sign of zero."""
    assert got.dtype == want.dtype
    nan = torch.isnan(want)
    assert torch.equal(torch.isnan(got), nan), f"{name}: NaN positions differ: " \
        f"{got[torch.isnan(got) != nan][:6].tolist()} vs {want[torch.isnan(got) != nan][:6].tolist()}"
    g, w = got[~nan].double(), want[~nan].double()
    inf = torch.isinf(w)
    assert torch.equal(g[inf], w[inf]), f"{name}: infinities differ"
    err = (g - w).abs()[~inf]
    tol = rel * w.abs()[~inf] + 1e-44
    bad = err > tol
    assert not bad.any(), f"{name}: got {g[~inf][bad][:4].tolist()} want {w[~inf][bad][:4].tolist()}"
    zeros = w == 0
    assert torch.equal(torch.signbit(g[zeros]), torch.signbit(w[zeros])), f"{name}: sign of zero"


SPECIAL = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-30, -1e-30, 1e-8, -3e-6,
           3.1415927, -3.1415927, 1.5707964, 6.2831855, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0,
           0.99999994, -0.99999994, 1e4, -1e7, 1.2e20, -3e38, 88.0, -100.0, 200.0]


def sample():
    g = torch.Generator().manual_seed(0)
    parts = [torch.tensor(SPECIAL), torch.randn(300, generator=g) * 10,
             torch.randn(100, generator=g) * 1e4, torch.rand(200, generator=g) * 2 - 1]
    return torch.cat(parts)


def unary_math(x):
    return (torch.sin(x), torch.cos(x), torch.tan(x), torch.atan(x), torch.asin(x),
            torch.acos(x), torch.sinh(x), torch.cosh(x), torch.exp2(x), torch.expm1(x),
            torch.log1p(x), torch.log2(x), torch.log10(x), torch.erfinv(x))


UNARY_NAMES = ["sin", "cos", "tan", "atan", "asin", "acos", "sinh", "cosh", "exp2", "expm1",
               "log1p", "log2", "log10", "erfinv"]


def test_unary_math_matches_torch():
    x = sample()
    got, want, aten = compiled_results(unary_math, x)
    assert not aten, f"fell back to ATen: {aten}"
    for name, g, w in zip(UNARY_NAMES, got, want):
        assert_ulps(name, g, w)


def test_sin_cos_huge_arguments_are_reduced_exactly():
    # Every float32 exponent up to the largest: the reduction modulo pi/2 must stay exact.
    x = torch.tensor([float(m) * 2.0 ** e for e in range(-20, 127, 3) for m in (1.0, 1.3, -1.7)])
    got, want, aten = compiled_results(lambda v: (torch.sin(v), torch.cos(v)), x)
    assert not aten
    assert_ulps("sin", got[0], want[0], rel=5e-7)
    assert_ulps("cos", got[1], want[1], rel=5e-7)


def rounding(x):
    return (torch.round(x), torch.trunc(x), torch.sign(x), torch.abs(x), torch.floor(x),
            torch.ceil(x), torch.reciprocal(x), torch.rsqrt(x))


def test_rounding_and_simple_unary_are_exact():
    x = torch.cat([sample(), torch.tensor([0.49999997, -0.49999997, 8388609.0, -8388609.0,
                                           3.5, 4.5, -0.3, 0.3])])
    got, want, aten = compiled_results(rounding, x)
    assert not aten, aten
    for name, g, w in zip(["round", "trunc", "sign", "abs", "floor", "ceil"], got, want):
        assert_same(name, g, w)
    assert_ulps("reciprocal", got[6], want[6])
    assert_ulps("rsqrt", got[7], want[7], rel=4e-7)


def test_integer_rounding_and_sign_keep_their_dtype():
    x = torch.tensor([-7, -1, 0, 1, 9, 2 ** 40])
    got, want, aten = compiled_results(lambda v: (torch.round(v), torch.trunc(v),
                                                  torch.sign(v)), x)
    assert not aten, aten
    for name, g, w in zip(["round", "trunc", "sign"], got, want):
        assert_same(name, g, w)


def division(a, b):
    return (a // b, torch.div(a, b, rounding_mode="trunc"), torch.remainder(a, b),
            torch.fmod(a, b), a % 3, torch.fmod(a, -2.5))


DIVISION_NAMES = ["floor_divide", "div trunc", "remainder", "fmod", "remainder scalar",
                  "fmod scalar"]


def test_float_division_family_is_bit_exact():
    a = torch.tensor([5.0, -5.0, 5.5, -5.5, 0.0, -0.0, 1e30, -1e30, 7.0, float("inf"),
                      float("nan"), 3.0, 1e-30, -7.5, 3.0, -6.0, 6.0, 1e-40, 3e30])
    b = torch.tensor([3.0, 3.0, -2.0, -2.0, 3.0, -3.0, 3e-7, 7.0, 0.0, 2.0, 1.0, float("inf"),
                      3.0, -float("inf"), -float("inf"), 3.0, -3.0, 3e-41, 1e-38])
    g = torch.Generator().manual_seed(1)
    a = torch.cat([a, torch.randn(400, generator=g) * 100])
    b = torch.cat([b, torch.randn(400, generator=g) * 5])
    got, want, aten = compiled_results(division, a, b)
    assert not aten, aten
    for name, gt, w in zip(DIVISION_NAMES, got, want):
        assert_same(name, gt, w)


def test_integer_division_family_matches_python_semantics():
    a = torch.tensor([7, -7, 7, -7, 0, 5, -1, 123456789012, -2 ** 62])
    b = torch.tensor([2, 2, -2, -2, 3, 7, 3, -1000, 3])
    got, want, aten = compiled_results(division, a, b)
    assert not aten, aten
    for name, gt, w in zip(DIVISION_NAMES, got, want):
        assert_same(name, gt, w)


def test_integer_division_by_zero_raises_like_torch():
    a, b = torch.tensor([4, 5]), torch.tensor([2, 0])
    with pytest.raises(RuntimeError):
        a // b  # eager torch refuses too
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, y: x // y, backend="tessera", options=KERNELS)
    compiled(a, torch.tensor([2, 1]))  # compile on valid inputs
    with pytest.raises((ZeroDivisionError, RuntimeError)):
        compiled(a, b)


def logic(c, d, x, y):
    return (c ^ d, torch.logical_xor(x, y), torch.logical_and(x, y), torch.logical_or(x, y),
            torch.logical_not(x), c & d, c | d, ~c, x < y, x == y, x != y, x >= y)


def test_bool_logic_and_comparisons():
    c = torch.tensor([True, False, True, False, True])
    d = torch.tensor([True, True, False, False, False])
    x = torch.tensor([0.0, float("nan"), 2.0, -0.0, float("inf")])
    y = torch.tensor([1.0, 0.0, 2.0, 0.0, float("nan")])
    got, want, aten = compiled_results(logic, c, d, x, y)
    assert not aten, aten
    for i, (gt, w) in enumerate(zip(got, want)):
        assert_same(f"logic output {i}", gt, w)


def clamping(x, lo, hi, i, ilo):
    return (torch.clamp(x, lo, hi), torch.clamp(x, min=lo), torch.clamp(x, max=hi),
            torch.clamp(i, ilo, ilo + 3), torch.clamp(x, -1.0, 0.5), torch.clamp(i, min=2),
            torch.where(x > 0, i, x), torch.where(x > 0, x, 0.0))


def test_clamp_with_tensor_bounds_and_where():
    x = torch.tensor([float("nan"), 1.0, 5.0, -3.0, 0.5, -0.0, float("inf")])
    lo = torch.tensor([0.0, float("nan"), 6.0, -4.0, 0.0, 0.0, 0.0])
    hi = torch.tensor([2.0, 2.0, 3.0, -3.5, 1.0, 1.0, float("nan")])
    i = torch.tensor([-5, 0, 3, 7, 10, 2, 1])
    ilo = torch.tensor([0, 1, 4, 2, 2, 0, 0])
    got, want, aten = compiled_results(clamping, x, lo, hi, i, ilo)
    assert not aten, aten
    for k, (gt, w) in enumerate(zip(got, want)):
        assert_same(f"clamp/where output {k}", gt, w)


def indexing(x, rows, cols):
    return x[rows] * 2, x[:, cols] + 1, x + torch.tensor([1.0, 2.0, 3.0])


def test_index_with_negative_indices_and_lift_fresh_copy():
    x = torch.randn(5, 3)
    rows = torch.tensor([[0, -1], [4, 2]])
    cols = torch.tensor([2, -3, 0, 1])
    got, want, aten = compiled_results(indexing, x, rows, cols)
    assert not aten, aten
    for k, (gt, w) in enumerate(zip(got, want)):
        assert_same(f"indexing output {k}", gt, w)


def gathers_and_scatters(table, rows, cols):
    base = torch.zeros(6, 4)
    base[1:, 1:] = table[:5, :3, 0] * 3  # a functional copy, then slice_scatter
    return (table[rows, cols] * 2,                    # two index tensors, broadcast
            table[:, cols[0, :2], rows[:2, 0]] + 1,   # at dims 1 and 2
            torch.slice_scatter(table, table[1:3] * 2, 0, 1, 3) + 1,
            base + 1,
            table[0].repeat(2, 1, 3) - 1)             # one more leading dim than the input


def test_multi_index_slice_scatter_copy_and_repeat():
    table = torch.randn(7, 5, 3)
    rows = torch.tensor([[0], [-1], [4], [6]])
    cols = torch.tensor([[2, -5, 0, 1, 4, 3]])
    got, want, aten = compiled_results(gathers_and_scatters, table, rows, cols)
    assert not aten, aten
    for k, (gt, w) in enumerate(zip(got, want)):
        assert_same(f"gather/scatter output {k}", gt, w)


def test_integer_bitwise_ops_fall_back_with_a_reason():
    a, b = torch.tensor([6, -3, 12]), torch.tensor([3, 5, -1])
    got, want, aten = compiled_results(lambda x, y: (x & y) + 1, a, b)
    assert torch.equal(got, want)
    assert aten == {"aten.bitwise_and.Tensor": 1}
