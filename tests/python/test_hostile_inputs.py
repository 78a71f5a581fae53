"""Hostile, odd and bad inputs, as a new user would try them: every case either matches eager
PyTorch exactly where eager's answer is defined, or ends in a clear error (never a crash, a hang
or a silently wrong answer).

Categories: long reductions, special values and signed zeros, every dtype Tessera compiles (bool
arithmetic, integer wrap-around, integer division and its errors, promotion), odd shapes
(zero-size, 0-d, non-contiguous, broadcast, changing shapes), mutation and aliasing, malformed
and hostile expressions, absurd sizes, many shapes in a long-running process, threads.
"""

import gc
import threading

import pytest
import torch

import tessera
from tessera import _C
from tessera.backend import graph as graph_mod

KERNELS = {"anchor_measure": False, "fallback": False}  # Tessera's kernels, errors raised


def compiled(fn, options=KERNELS, **kw):
    """fn compiled by Tessera, called twice per call on the same inputs, returning the second
    result: the first call of a graph (or of a new input signature) runs it eagerly while
    recording shapes, so its results are eager's; the second runs Tessera's kernels. (A test
    of a function that mutates its inputs calls torch.compile itself.)"""
    torch._dynamo.reset()
    c = torch.compile(fn, backend="tessera", options=options, **kw)

    def twice(*args):
        c(*args)
        return c(*args)
    return twice


def kernels_since(serial):
    return sum(s.kernels for g in tessera.backend.compiled_graphs() if g.serial > serial
               for s in g.summaries.values())


def same(got, want):
    """Bitwise equality, NaN == NaN and the sign of zero included."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    if want.is_floating_point():
        assert torch.equal(torch.isnan(got), torch.isnan(want)), (got, want)
        finite = ~torch.isnan(want)
        assert torch.equal(got[finite], want[finite]), (got, want)
        assert torch.equal(torch.signbit(got[finite]), torch.signbit(want[finite])), (got, want)
    else:
        assert torch.equal(got, want), (got, want)


# ---- long reductions ----------------------------------------------------------------------

def test_full_sum_over_two_to_the_25_elements_is_exact():
    x = torch.ones(1 << 25)
    since = tessera.backend.last_serial()
    f = compiled(lambda x: (x * 2).sum())
    assert f(x).item() == 67108864.0
    assert kernels_since(since) >= 1


def test_full_mean_of_ones_is_one():
    f = compiled(lambda x: x.mean())
    assert f(torch.ones(1 << 25)).item() == 1.0


def test_full_mean_is_as_accurate_as_eager():
    torch.manual_seed(0)
    y = torch.randn(8192, 4096) + 1
    want = y.double().mean().item()
    got = compiled(lambda x: x.mean())(y).item()
    eager_err = abs(y.mean().item() - want) / abs(want)
    # Within a few ulps of the float32 result eager gives (eager's error is one rounding).
    assert abs(got - want) / abs(want) <= max(4 * eager_err, 3e-7)


def test_column_sum_and_variance_over_a_long_axis():
    torch.manual_seed(1)
    x = torch.rand(200003, 6) + 1
    got_sum, got_var = compiled(lambda x: (x.sum(0), x.var(0)))(x)
    want_sum, want_var = x.double().sum(0), x.double().var(0)
    assert torch.allclose(got_sum.double(), want_sum, rtol=2e-6)
    assert torch.allclose(got_var.double(), want_var, rtol=1e-4)


# ---- special values and signed zeros ------------------------------------------------------

SPECIAL = torch.tensor([-0.0, 0.0, float("nan"), float("inf"), -float("inf"), 1e-45, -1e-45,
                        3.4e38, -3.4e38, 1.0, -1.0] * 3)


@pytest.mark.parametrize("name,fn", [
    ("relu", torch.relu), ("neg", torch.neg), ("tanh", torch.tanh), ("abs", torch.abs),
    ("clamp", lambda x: x.clamp(-1.0, 1.0)), ("max0", lambda x: torch.maximum(x, x * 0)),
    ("sqrt_abs", lambda x: torch.sqrt(torch.abs(x))), ("mul", lambda x: x * x),
    ("where", lambda x: torch.where(x > 0, x, -x)),
])
def test_special_values_match_eager_bit_for_bit(name, fn):
    same(compiled(fn)(SPECIAL), fn(SPECIAL))


def test_nan_propagates_through_max_and_reductions():
    x = torch.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, 6.0]])
    f = compiled(lambda x: (x.amax(1), x.amin(1), x.sum(1), torch.softmax(x, 1)))
    for got, want in zip(f(x), (x.amax(1), x.amin(1), x.sum(1), torch.softmax(x, 1))):
        same(got, want)


def test_softmax_of_infinities_matches_eager():
    x = torch.tensor([[0.0, -float("inf"), 1.0], [float("inf"), 1.0, 2.0]])
    same(compiled(lambda x: torch.softmax(x, -1))(x), torch.softmax(x, -1))


# ---- dtypes -------------------------------------------------------------------------------

def test_bool_arithmetic_saturates_like_eager():
    a = torch.tensor([True, True, False, False] * 5)
    b = torch.tensor([True, False, True, False] * 5)
    f = compiled(lambda a, b: (a + b, a * b, a & b, a | b, a ^ b, ~a))
    for got, want in zip(f(a, b), (a + b, a * b, a & b, a | b, a ^ b, ~a)):
        same(got, want)


def test_bool_add_inside_a_larger_graph_with_default_options():
    a = torch.tensor([True, True, False]).repeat(100)
    x = torch.randn(300)
    fn = lambda a, x: ((a + a).float() * x).relu()  # noqa: E731
    same(compiled(fn, options={})(a, x), fn(a, x))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer_arithmetic_wraps_like_eager(dtype):
    info = torch.iinfo(dtype)
    x = torch.tensor([info.max, info.min, 7, -7, 0], dtype=dtype)
    fn = lambda x: (x + 1, x - 1, x * 3, -x, x * x)  # noqa: E731
    for got, want in zip(compiled(fn)(x), fn(x)):
        same(got, want)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer_max_and_min_of_values_of_one_sign_match_eager(dtype):
    # The identities of max and min are the dtype's own lowest and highest values: int64's,
    # truncated to int32, are 0 and -1 (a max of negatives came out 0).
    info = torch.iinfo(dtype)
    neg = -torch.randint(1, 50, (5, 7), dtype=dtype)
    fn = lambda x: (x.amax(0), x.amin(1), x.amax(), torch.max(x, 1).values)  # noqa: E731
    for x in (neg, -neg, torch.full((3, 4), info.min, dtype=dtype),
              torch.full((3, 4), info.max, dtype=dtype)):
        for got, want in zip(compiled(fn)(x), fn(x)):
            same(got, want)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_comparisons_of_overflowing_integers_match_eager(dtype):
    # (a + b) > a is b > 0 only without overflow: neither the simplifier nor LLVM (through
    # nsw flags) may assume that of values read from memory.
    info = torch.iinfo(dtype)
    a = torch.tensor([info.max, info.min, 5, info.max - 2] * 8, dtype=dtype)
    b = torch.tensor([1, -1, 2, 7] * 8, dtype=dtype)
    fn = lambda a, b: ((a + b) > a, (a - b) < a, (a + b) >= a + 1, a * 2 > a)  # noqa: E731
    for got, want in zip(compiled(fn)(a, b), fn(a, b)):
        same(got, want)


def test_division_of_overflowing_integer_sums_matches_eager():
    # (a + 8b) // 8 is a // 8 + b only without overflow; values read from memory wrap around.
    a = torch.tensor([2**63 - 5, 3, -9, 2**62] * 8, dtype=torch.int64)
    b = torch.tensor([1, 2, 3, 2**60] * 8, dtype=torch.int64)
    div = tessera.op("C[i] = (A[i] + 8 * B[i]) // 8")
    mod = tessera.op("C[i] = (A[i] + 6 * B[i]) % 6")
    same(div(a, b), torch.div(a + 8 * b, 8, rounding_mode="floor"))
    same(mod(a, b), torch.remainder(a + 6 * b, 6))


def test_integer_floor_division_and_remainder_of_negatives():
    a = torch.tensor([7, -7, 7, -7, 0, 5], dtype=torch.int32)
    b = torch.tensor([2, 2, -2, -2, 3, -1], dtype=torch.int32)
    fn = lambda a, b: (a // b, a % b, torch.div(a, b, rounding_mode="floor"))  # noqa: E731
    for got, want in zip(compiled(fn)(a, b), fn(a, b)):
        same(got, want)


def test_integer_to_float_promotion():
    i = torch.arange(-5, 5, dtype=torch.int32)
    x = torch.linspace(-1, 1, 10)
    fn = lambda i, x: (i + x, i * 0.5, i / 2, (i > 0) * x)  # noqa: E731
    for got, want in zip(compiled(fn)(i, x), fn(i, x)):
        same(got, want)


def test_expression_integer_division_by_zero_raises():
    a = torch.arange(8, dtype=torch.int32) + 3
    b = torch.ones(8, dtype=torch.int32)
    for src in ("C[i] = A[i] // B[i]", "C[i] = A[i] % B[i]"):
        op = tessera.op(src)
        assert torch.equal(op(a, b * 2), a // 2 if "//" in src else a % 2)
        b0 = b.clone()
        b0[3] = 0
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            op(a, b0)


def test_compiled_integer_division_by_zero_raises_like_eager():
    a = torch.arange(6, dtype=torch.int32)
    b = torch.tensor([1, 2, 0, 1, 1, 1], dtype=torch.int32)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        a // b
    f = compiled(lambda a, b: a // b)
    same(f(a, b + 3), a // (b + 3))  # planned on divisors without a zero
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        f(a, b)  # the kernel's own check


def test_int_min_divided_by_minus_one_does_not_crash():
    # Eager PyTorch dies of SIGFPE here; Tessera wraps around (two's complement) instead.
    op = tessera.op("C[i] = A[i] // B[i] + A[i] % B[i]")
    a = torch.tensor([-2 ** 31, 9], dtype=torch.int32)
    b = torch.tensor([-1, -1], dtype=torch.int32)
    assert op(a, b).tolist() == [-2 ** 31, -9]


# ---- shapes and layouts -------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: torch.randn(0, 5), lambda: torch.randn(3, 0), lambda: torch.randn(()),
    lambda: torch.randn(6, 8).t(), lambda: torch.randn(8, 10)[::2, 1:7],
    lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
    lambda: torch.randn(1, 7).expand(5, 7),
])
def test_odd_layouts_and_sizes(make):
    x = make()
    fn = lambda x: (torch.tanh(x) * 2 + 1, x.sum(-1) if x.dim() else x + 1)  # noqa: E731
    for got, want in zip(compiled(fn)(x), fn(x)):
        assert got.shape == want.shape and torch.allclose(got, want, atol=1e-5)


def test_a_zero_size_tensor_leaves_the_work_around_it_fused():
    # A key/value cache before its first entry: the concatenation computes nothing and runs
    # through ATen, while the projection that feeds it is still a Tessera kernel.
    w = torch.randn(24, 16)
    cache = torch.zeros(1, 0, 24)

    def step(x):
        y = torch.relu(x @ w.t()).unsqueeze(0)
        return torch.cat([cache, y], 1) * 2

    x = torch.randn(8, 16)
    torch._dynamo.reset()
    since = tessera.backend.last_serial()
    torch.testing.assert_close(compiled(step)(x), step(x), rtol=1e-5, atol=1e-5)
    parts = [p for s in tessera.backend.recent_summaries(since) for p in s.partitions]
    fused = [p for p in parts if any("mm" in op for op in p["ops"])]
    assert fused and all(p["impl"] == "tessera" for p in fused), parts
    assert not any(s.aten_ops for s in tessera.backend.recent_summaries(since))


def test_batch_norms_empty_saved_statistics_do_not_split_its_partition():
    # Inference batch norm returns its output with two empty statistics; only the output is
    # read, so convolution, batch norm and activation stay one kernel.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.BatchNorm2d(16),
                                torch.nn.ReLU()).eval()
    x = torch.randn(1, 8, 12, 12)
    torch._dynamo.reset()
    since = tessera.backend.last_serial()
    with torch.no_grad():
        torch.testing.assert_close(compiled(model)(x), model(x), rtol=1e-4, atol=1e-4)
    parts = [p for s in tessera.backend.recent_summaries(since) for p in s.partitions]
    conv = [p for p in parts if "aten.convolution.default" in p["ops"]]
    assert len(conv) == 1 and conv[0]["impl"] == "tessera", parts
    assert any("batch_norm" in op for op in conv[0]["ops"]), conv[0]["ops"]
    assert any("relu" in op for op in conv[0]["ops"]), conv[0]["ops"]


def test_shape_changes_between_calls():
    f = compiled(lambda x: torch.softmax(x * 3, -1))
    for shape in [(4, 9), (4, 9), (7, 3), (1, 1), (0, 5), (4, 9)]:
        x = torch.randn(shape)
        assert torch.allclose(f(x), torch.softmax(x * 3, -1), atol=1e-6)


def test_mutation_and_aliasing_match_eager():
    def fn(x, y):
        x.add_(1)
        v = y.view(-1)
        return x * 2, v, y.t()
    x1, y1 = torch.randn(4, 5), torch.randn(3, 4)
    x2, y2 = x1.clone(), y1.clone()
    torch._dynamo.reset()
    c = torch.compile(fn, backend="tessera", options=KERNELS)
    c(x1.clone(), y1.clone())  # the recording call (eager); the next one runs the kernels
    got, want = c(x1, y1), fn(x2, y2)
    assert torch.equal(x1, x2)
    for g, w in zip(got, want):
        assert torch.allclose(g, w)
    assert got[1].data_ptr() == y1.data_ptr()  # a view stays a view


# ---- malformed and hostile expressions, absurd sizes ---------------------------------------

@pytest.mark.parametrize("source,needle", [
    ("C[i] = " + "(" * 10000 + "A[i]" + ")" * 10000, "nests deeper"),
    ("C[i] = " + "-" * 20000 + "A[i]", "nests deeper"),
    ("C[i] = A[i]" + " + A[i]" * 10000, "nests deeper"),
    ("C[i] = nosuch(A[i])", "unknown function"),
    ("C[i] = A[i] +", "expected an operand"),
    ("C[i, i] = A[i]", "appears twice"),
    ("C[i] = A[i, j]", "is not bound"),
    ("", "empty expression"),
])
def test_malformed_expressions_are_clear_errors(source, needle):
    with pytest.raises(tessera.op.__globals__["ExpressionError"], match=needle):
        tessera.op(source)


def test_absurd_sizes_are_clear_errors():
    with pytest.raises(RuntimeError, match="dimensions must be >= 0"):
        tessera.placeholder("N", [-4, 3])
    with pytest.raises(RuntimeError, match="empty range"):
        tessera.size_var("n", 5, 2)
    op = tessera.op("C[i, j] = A[i]", shapes={"j": 1 << 62})
    with pytest.raises(RuntimeError, match="overflows int64"):
        op(torch.ones(3))


def test_long_elementwise_chain_compiles():
    # 400 dependent multiply-adds in one kernel, contracted to fused multiply-adds (one rounding
    # where eager rounds twice): as accurate as eager against the float64 result, not equal.
    def fn(x):
        for _ in range(400):
            x = x * 1.001 + 0.001
        return x
    x = torch.randn(64, generator=torch.Generator().manual_seed(0))
    exact = fn(x.double())
    eager_err = (fn(x).double() - exact).abs().max().item()
    assert (compiled(fn)(x).double() - exact).abs().max().item() <= 2 * eager_err + 1e-6


def test_branching_chain_does_not_blow_up():
    def fn(x):
        for _ in range(30):
            x = x * x
        return x
    x = torch.rand(33) * 0.5 + 0.75
    assert torch.allclose(compiled(fn)(x), fn(x), rtol=1e-4, equal_nan=True)


# ---- long-running processes: bounded caches, threads --------------------------------------

def test_many_shapes_keep_a_bounded_number_of_kernels(monkeypatch):
    monkeypatch.setattr(graph_mod, "SHAPES_PER_GRAPH", 3)
    info = tessera.jit_cache_info()
    tessera.set_jit_cache_limit(64 << 10)
    try:
        m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU()).eval()
        f = compiled(m)
        gc.collect()
        live_before = _C.live_kernels()
        peak = 0
        with torch.no_grad():
            for n in range(1, 40):
                x = torch.randn(n, 8)
                assert torch.allclose(f(x), m(x), atol=1e-5)
                gc.collect()
                peak = max(peak, _C.live_kernels() - live_before)
        now = tessera.jit_cache_info()
        assert now["code_bytes"] <= 64 << 10 or now["kernels"] == 1
        assert now["evictions"] > info["evictions"]
        assert peak <= 12, f"{peak} kernels alive for 3 shapes per graph"
    finally:
        tessera.set_jit_cache_limit(info["limit_bytes"])


def test_evicted_kernel_in_use_keeps_working():
    op = tessera.op("C[i] = A[i] * 2 + 1", name="hostile_evicted")
    x = torch.randn(11)
    k = op.kernel(x)
    info = tessera.jit_cache_info()
    tessera.set_jit_cache_limit(1)  # forget everything the backend's cache holds
    try:
        gc.collect()
        assert torch.allclose(k(x), x * 2 + 1)
    finally:
        tessera.set_jit_cache_limit(info["limit_bytes"])


def test_concurrent_calls_from_threads():
    f = compiled(lambda x: torch.tanh(x) @ x.t())
    xs = [torch.randn(32, 16) for _ in range(4)]
    f(xs[0])
    errors = []

    def work(x):
        try:
            for _ in range(20):
                assert torch.allclose(f(x), torch.tanh(x) @ x.t(), atol=1e-4)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)
    threads = [threading.Thread(target=work, args=(x,)) for x in xs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
