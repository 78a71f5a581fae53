"""Dynamic shapes end to end: one plan whose kernels take their sizes at run time.

torch.compile(dynamic=True) and mark_dynamic give the backend graphs with SymInt shapes; the
backend plans them once over Tessera size variables (backend/symbolic.py). These tests check
that the results match eager for many sizes, that new sizes compile no kernels (the JIT and
kernel-build counters stay put), and that what cannot be size-generic falls back cleanly.
"""

import pytest
import torch

import tessera
from tessera import _C
from tessera.backend import graph as graph_mod
from tessera.backend import kernel_build
from tessera.backend.lowering import LOWERINGS, ops

aten = torch.ops.aten


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class Block(torch.nn.Module):
    """A transformer-style block without attention: layer norm, two linears, gelu, residual,
    softmax over the (static) feature dimension."""

    def __init__(self, d: int = 32):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, 2 * d)
        self.down = torch.nn.Linear(2 * d, d)

    def forward(self, x):
        h = self.down(torch.nn.functional.gelu(self.up(self.norm(x))))
        return torch.softmax(x + h, dim=-1) * 2.0 + torch.tanh(h)


def _jit() -> int:
    return int(_C.compile_counters()["jit_compiles"])


def _range_summary():
    """The summary of the one plan for a range of sizes compiled so far."""
    found = [g.summaries.get("range") for g in tessera.backend.compiled_graphs()]
    found = [s for s in found if s is not None]
    assert len(found) == 1, found
    return found[0]


def _options(**kw):
    return {"records_db": False, **kw}


def _check_sizes(fn, ref, sizes, make):
    for n in sizes:
        x = make(n)
        with torch.no_grad():
            torch.testing.assert_close(fn(x), ref(x), rtol=1e-4, atol=1e-5)


def test_dynamic_model_matches_eager_and_compiles_nothing_per_size():
    torch.manual_seed(0)
    model = Block().eval()
    # anchor_measure off: every partition is a Tessera kernel, whatever the timings say.
    fn = torch.compile(model, backend="tessera", dynamic=True,
                       options=_options(anchor_measure=False))
    make = lambda n: torch.randn(3, n, 32)  # noqa: E731
    plans0 = graph_mod.stats["range_plans"]
    _check_sizes(fn, model, [7], make)  # first call: plans and compiles once
    assert graph_mod.stats["range_plans"] == plans0 + 1
    jit, built = _jit(), kernel_build.stats["compiled"]
    # The plan runs Tessera kernels, every partition size-generic (else this test would
    # prove nothing about them).
    summary = _range_summary()
    assert summary.kernels >= 2 and not summary.failures, summary.describe()
    _check_sizes(fn, model, [2, 5, 19, 64, 33, 100, 8, 7], make)
    assert _jit() == jit, "a new size JIT-compiled kernels"
    assert kernel_build.stats["compiled"] == built
    assert graph_mod.stats["range_plans"] == plans0 + 1


def test_per_signature_plans_compile_per_size():
    """The contrast that makes the test above meaningful: planned per signature (symbolic
    off), new sizes do compile kernels."""
    torch.manual_seed(0)
    model = Block().eval()
    fn = torch.compile(model, backend="tessera", dynamic=True,
                       options=_options(symbolic=False))
    make = lambda n: torch.randn(2, n, 32)  # noqa: E731
    _check_sizes(fn, model, [6], make)
    jit = _jit()
    _check_sizes(fn, model, [11, 23], make)
    assert _jit() > jit


def test_mark_dynamic_batch():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 24), torch.nn.ReLU(),
                                torch.nn.LayerNorm(24)).eval()
    fn = torch.compile(model, backend="tessera", options=_options())
    x = torch.randn(5, 16)
    torch._dynamo.mark_dynamic(x, 0)
    with torch.no_grad():
        torch.testing.assert_close(fn(x), model(x), rtol=1e-4, atol=1e-5)
    jit = _jit()
    _check_sizes(fn, model, [3, 9, 40, 2], lambda n: torch.randn(n, 16))
    assert _jit() == jit


def test_declared_range_and_calls_outside_it():
    torch.manual_seed(0)
    model = Block(16).eval()
    fn = torch.compile(model, backend="tessera", dynamic=True,
                       options=_options(dynamic_ranges={"*": (2, 16)}))
    make = lambda n: torch.randn(n, 16)  # noqa: E731
    _check_sizes(fn, model, [8], make)
    graphs = [g for g in tessera.backend.compiled_graphs() if g.sym is not None]
    assert graphs and all(s.hi == 16 for g in graphs for s in g.sym.symbols.values())
    plans = graph_mod.stats["plans"]
    _check_sizes(fn, model, [3, 16], make)
    assert graph_mod.stats["plans"] == plans  # inside the range: the one plan
    _check_sizes(fn, model, [40, 17], make)  # outside: planned for their own shapes
    assert graph_mod.stats["plans"] == plans + 2


def test_bad_declared_range_is_a_clear_error():
    with pytest.raises(ValueError, match="dynamic_ranges"):
        tessera.backend.parse_options(None, {"dynamic_ranges": {"*": (9, 2)}})


def test_size_dependent_scalar_runs_through_aten():
    """x * x.shape[0]: the multiplication reads a size as a scalar; its partition cannot be
    size-generic and runs through ATen, with the reason in the summary."""
    def f(x):
        return torch.relu(x) * x.shape[0] + 1.0
    fn = torch.compile(f, backend="tessera", dynamic=True, options=_options())
    make = lambda n: torch.randn(n, 8)  # noqa: E731
    _check_sizes(fn, f, [4, 9, 2, 31], make)
    reasons = [r for g in tessera.backend.compiled_graphs()
               for s in g.summaries.values() for r in s.aten_reasons.values()]
    assert any("size-dependent" in r for r in reasons), reasons


def test_kernel_wrong_at_other_sizes_falls_back(monkeypatch):
    """A lowering that bakes the recorded size into its kernel (a mean as sum / n with n
    concrete) is caught by the probe at another size: the partition runs through ATen, logged,
    and every size is still right."""
    low = LOWERINGS[aten.mean.dim]

    def baked_mean(ctx, node, x, dim=None, keepdim=False, dtype=None):
        n = ctx.concrete[node.args[0]].shape[dim[0]]
        return ops.mul(ops.reduce_sum(x, list(dim), keepdim), 1.0 / n)
    monkeypatch.setattr(low, "fn", baked_mean)

    def f(x):
        return (x - x.mean(0, keepdim=True)).exp()
    # A range within one sum chunk: the column sum is not split (see the next test).
    fn = torch.compile(f, backend="tessera", dynamic=True,
                       options=_options(dynamic_ranges={"*": (2, 1024)}))
    make = lambda n: torch.randn(n, 8)  # noqa: E731
    _check_sizes(fn, f, [6, 3, 12, 50], make)
    failures = [p for g in tessera.backend.compiled_graphs() for s in g.summaries.values()
                for p in s.partitions if p["impl"] == "failed"]
    assert any("differs from eager" in p["reason"] for p in failures), failures


def test_size_expressions():
    s = _C.size_var("s", 2, 100)
    assert repr(s * 4 + 1) == "s * 4 + 1"
    assert repr((s * 4 + 1) // 2) == "s * 2"  # simplified as built
    assert repr(1 * s) == "s" and repr(s % 1) == "0"


def test_long_size_dependent_sums_run_as_kernels():
    """A column sum over a size whose range exceeds one sum chunk is split into pieces that can
    be empty at run time (split_reduction.h); an empty piece writes 0, so the kernel is right at
    sizes below, at and above the chunk and its partition stays a Tessera kernel."""
    def f(x):
        return (x * 2.0).sum(0) + 1.0
    fn = torch.compile(f, backend="tessera", dynamic=True, options=_options())
    _check_sizes(fn, f, [5, 3, 8192, 9000], lambda n: torch.randn(n, 16))
    partitions = [p for g in tessera.backend.compiled_graphs() for s in g.summaries.values()
                  for p in s.partitions]
    assert partitions and all(p["impl"] != "failed" for p in partitions), partitions


def test_anchor_partitions_are_tuned_by_dietcode_over_the_range():
    """Under a tuning mode, a size-generic matmul partition is tuned once by DietCode over the
    declared range (micro-kernels + dispatcher) and serves every size without compiling."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.GELU()).eval()
    fn = torch.compile(model, backend="tessera",
                       options=_options(anchor_measure=False, tune="construct",
                                        prepack_weights=False,  # weights read as they are
                                        dynamic_ranges={"*": (2, 256)}))
    x = torch.randn(40, 64)
    torch._dynamo.mark_dynamic(x, 0)
    tuned = kernel_build.stats["dietcode"]
    with torch.no_grad():
        torch.testing.assert_close(fn(x), model(x), rtol=1e-4, atol=1e-4)
    assert kernel_build.stats["dietcode"] == tuned + 1
    jit = _jit()
    for n in (2, 17, 64, 255, 256, 3):
        xn = torch.randn(n, 64)
        with torch.no_grad():
            torch.testing.assert_close(fn(xn), model(xn), rtol=1e-4, atol=1e-4)
    assert _jit() == jit


def test_under_search_mode_dietcode_searches_the_largest_instance(monkeypatch):
    """tune="search": DietCode's candidates include search mode's choice on the largest instance
    (with the option's trials), and the kernel still serves every size."""
    import json

    from tessera import _C
    reports = []
    tune = _C.dynamic.tune

    def recording_tune(*args, **kwargs):
        kernel = tune(*args, **kwargs)
        reports.append(json.loads(kernel.report))
        return kernel

    monkeypatch.setattr(_C.dynamic, "tune", recording_tune)
    torch.manual_seed(0)
    # 256 rows x 128 x 256: enough work at the largest size for search to tune it.
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.GELU()).eval()
    fn = torch.compile(model, backend="tessera",
                       options=_options(anchor_measure=False, tune="search", trials=4,
                                        progress=False, dynamic_ranges={"*": (2, 256)}))
    x = torch.randn(40, 128)
    torch._dynamo.mark_dynamic(x, 0)
    with torch.no_grad():
        for n in (40, 2, 17, 256):
            xn = torch.randn(n, 128)
            torch.testing.assert_close(fn(xn), model(xn), rtol=1e-4, atol=1e-4)
    assert [r["search_measured"] for r in reports] == [4]


def test_dietcode_reads_weights_packed_once_and_again_after_a_change():
    """With weights prepacked (inference), DietCode's micro-kernels read the weight from its
    packed argument: packed on the first call, not again for other sizes, packed again when
    the weight changes in place; every output matches eager."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.GELU()).eval()
    fn = torch.compile(model, backend="tessera",
                       options=_options(anchor_measure=False, tune="construct",
                                        dynamic_ranges={"*": (2, 256)}))
    x = torch.randn(40, 64)
    torch._dynamo.mark_dynamic(x, 0)
    tuned, packs = kernel_build.stats["dietcode"], kernel_build.stats["weight_packs"]
    with torch.no_grad():
        for _ in range(2):  # the second call runs the kernels (the first may record)
            torch.testing.assert_close(fn(x), model(x), rtol=1e-4, atol=1e-4)
        assert kernel_build.stats["dietcode"] == tuned + 1
        assert kernel_build.stats["weight_packs"] > packs
        packs = kernel_build.stats["weight_packs"]
        for n in (2, 17, 64, 255, 256, 3):
            xn = torch.randn(n, 64)
            torch.testing.assert_close(fn(xn), model(xn), rtol=1e-4, atol=1e-4)
        assert kernel_build.stats["weight_packs"] == packs
        model[0].weight.mul_(-0.5)
        for n in (5, 200):
            xn = torch.randn(n, 64)
            torch.testing.assert_close(fn(xn), model(xn), rtol=1e-4, atol=1e-4)
        assert kernel_build.stats["weight_packs"] == packs + 1
    assert "[dietcode]" in str(tessera.explain(fn))


def test_training_with_dynamic_shapes():
    """Forward and backward graphs both get plans for the range: gradients match eager at every
    size and later sizes compile nothing."""
    torch.manual_seed(0)
    model = Block(16)
    fn = torch.compile(model, backend="tessera", dynamic=True, options=_options())
    jit = None
    for i, n in enumerate((6, 9, 3, 21)):
        x = torch.randn(2, n, 16, requires_grad=True)
        model.zero_grad()
        fn(x).square().sum().backward()
        got = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
        model.zero_grad()
        x.grad = None
        model(x).square().sum().backward()
        want = [p.grad for p in model.parameters()] + [x.grad]
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-3, atol=1e-4)
        if i == 0:
            jit = _jit()
    assert _jit() == jit
    kinds = {g.kind for g in tessera.backend.compiled_graphs() if g.summaries.get("range")}
    assert kinds == {"forward", "backward"}, kinds
