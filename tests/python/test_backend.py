"""torch.compile(backend="tessera"): registration, options, partitioning, ATen fallbacks,
measurement-based choices, inputs (layouts, zero-size, scalars, dtypes) and dynamic shapes.

Every compiled result is compared with eager PyTorch. The first call of a compiled graph runs
eagerly while recording shapes, so each check calls the compiled function at least twice and
compares the later calls, which run the Tessera kernels.
"""

import logging
import os
import subprocess
import sys

import pytest
import torch

import tessera
from tessera import backend
from tessera.backend import anchor as anchor_choice
from tessera.backend import graph as graph_mod
from tessera.backend.log import reset_log_once

# Kernels only (no measurement): what these tests check is Tessera's code, so they must not
# depend on which candidate a timing on a loaded machine happens to prefer.
KERNELS = {"anchor_measure": False, "fallback": False}


def _compile(fn, **kw):
    torch._dynamo.reset()
    if "mode" not in kw:  # torch.compile takes a mode or options, not both
        kw.setdefault("options", KERNELS)
    return torch.compile(fn, backend="tessera", **kw)


def _run_twice(compiled, *args):
    compiled(*args)  # records shapes (eager) and compiles
    return compiled(*args)


def _summaries(since):
    return backend.recent_summaries(since)


def _graph_ids():
    return backend.last_serial()


# ---- registration and options ------------------------------------------------------------

def test_backend_is_listed_after_import():
    assert "tessera" in torch._dynamo.list_backends()


def test_backend_works_without_importing_tessera():
    code = (
        "import sys, torch\n"
        "f = torch.compile(lambda x: torch.relu(x) * 2 + 1, backend='tessera')\n"
        "x = torch.randn(5, 7)\n"
        "f(x); y = f(x)\n"
        "assert torch.allclose(y, torch.relu(x) * 2 + 1)\n"
        "assert 'tessera' in sys.modules\n"  # loaded through the entry point
        "print('ok')\n")
    env = dict(os.environ)
    root = os.path.join(os.path.dirname(__file__), "..", "..", "torch_backend")
    env["PYTHONPATH"] = os.path.abspath(root) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ok" in out.stdout


def test_unknown_option_is_a_clear_error():
    with pytest.raises(TypeError, match="unknown option.*'tunning'.*valid options.*tune"):
        backend.parse_options(None, {"tunning": "search"})
    f = torch.compile(lambda x: x + 1, backend="tessera", options={"verbos": True})
    with pytest.raises(Exception, match="verbos"):
        f(torch.randn(3))
    torch._dynamo.reset()


def test_option_values_are_checked():
    with pytest.raises(ValueError, match="tune"):
        backend.parse_options(None, {"tune": "fast"})
    with pytest.raises(ValueError, match="verbose"):
        backend.parse_options(None, {"verbose": "yes"})
    with pytest.raises(ValueError, match="mode"):
        backend.parse_options("turbo", None)


def test_asking_for_tuning_tunes_every_kernel():
    """options={"tune": ...} tunes every kernel (tune_scope "every"); the default and
    mode="max-autotune" tune the kernels whose tuning can pay back (tune_scope "automatic")."""
    assert backend.parse_options(None, {"tune": "construct"}).tune_scope == "every"
    assert backend.parse_options(None, None).tune_scope == "automatic"
    assert backend.parse_options("max-autotune", None).tune_scope == "automatic"
    assert backend.parse_options(None, {"tune": "construct", "tune_scope": "automatic"}
                                 ).tune_scope == "automatic"
    with pytest.raises(ValueError, match="tune_scope"):
        backend.parse_options(None, {"tune_scope": "all"})
    from tessera.backend import records
    x, w = torch.randn(16, 24), torch.randn(24, 8)
    tuned = {}
    # A 16x24x8 matmul: far below the automatic scope's minimum work, even as its whole graph.
    for name, extra in (("automatic", {}), ("asked", {"tune": "construct"})):
        before = records.counters()["tuned"]
        f = _compile(lambda x: torch.relu(x @ w),
                     options={**KERNELS, "records_db": False, **extra})
        torch.testing.assert_close(_run_twice(f, x), torch.relu(x @ w), rtol=1e-4, atol=1e-4)
        tuned[name] = records.counters()["tuned"] - before
    assert tuned == {"automatic": 0, "asked": 1}
    torch._dynamo.reset()


def test_mode_and_options_reach_tessera(caplog):
    assert backend.parse_options("max-autotune", None).tune == "search"
    assert backend.parse_options(None, {"tune": "construct"}).tune == "construct"
    assert backend.parse_options(None, None) == backend.Options()
    reset_log_once()
    x = torch.randn(4, 4)
    with caplog.at_level(logging.INFO, logger="tessera"):
        f = _compile(lambda x: torch.tanh(x) + 1, mode="max-autotune")
        torch.testing.assert_close(_run_twice(f, x), torch.tanh(x) + 1)
        g = _compile(lambda x: torch.tanh(x) - 1,
                     options={"verbose": True, "records_db": "/tmp/none.db"})
        torch.testing.assert_close(_run_twice(g, x), torch.tanh(x) - 1)
    text = caplog.text
    assert "tune='search'" in text            # the mode arrived as tune=search
    assert "search mode tunes" in text        # and got the most tuning there is, not the least
    assert "records_db" in text               # the option arrived
    assert "Tessera kernels" in text          # verbose: the compiled graph was described


# ---- partitioning and fusion ---------------------------------------------------------------

def test_elementwise_chain_and_reduction_are_one_kernel():
    def fn(x, y):
        z = torch.sigmoid(x * 2 + y) - 0.5
        return torch.softmax(z, dim=-1) * z.abs()
    before = _graph_ids()
    f = _compile(fn)
    x, y = torch.randn(6, 33), torch.randn(33)
    torch.testing.assert_close(_run_twice(f, x, y), fn(x, y), rtol=1e-5, atol=1e-6)
    (s,) = _summaries(before)
    assert s.kernels == 1 and not s.aten_ops
    assert "del " in s.source or s.source.count("\n") < 8


def test_matmul_epilogue_fused_when_measurement_is_off():
    lin = torch.nn.Linear(40, 24)

    def fn(x):
        return torch.relu(lin(x)) + 1
    before = _graph_ids()
    f = _compile(fn)
    x = torch.randn(16, 40)
    with torch.no_grad():
        torch.testing.assert_close(_run_twice(f, x), fn(x), rtol=1e-4, atol=1e-4)
    (s,) = _summaries(before)
    assert s.kernels == 1  # addmm + relu + add in one kernel


def test_clones_cost_nothing_unless_they_change_layout_or_are_observable():
    def fn(x):
        y = torch.cumsum(x, 1).clone()              # same layout, unobservable: free
        z = (y * 2).t().clone(memory_format=torch.contiguous_format)  # a transposing copy
        return torch.cumsum(z, 0) + 1, x.clone()   # the output clone: a real copy
    before = _graph_ids()
    f = _compile(fn)
    x = torch.randn(5, 6)
    got = _run_twice(f, x)
    for g, w in zip(got, fn(x)):
        torch.testing.assert_close(g, w)
    assert got[1].data_ptr() != x.data_ptr()
    (s,) = _summaries(before)
    assert s.aten_ops == {"aten.cumsum.default": 2}
    assert "mul_clone" in s.source       # the transposing copy is fused into the mul kernel
    assert "memory_format" not in s.source and "aten.clone" not in s.source


def test_unsupported_op_runs_through_aten_and_is_logged_once(caplog):
    def fn(x):
        return torch.cumsum(torch.exp(x), dim=1) * 2 + 1
    reset_log_once()
    before = _graph_ids()
    with caplog.at_level(logging.INFO, logger="tessera"):
        f = _compile(fn)
        x = torch.randn(3, 9)
        torch.testing.assert_close(_run_twice(f, x), fn(x), rtol=1e-5, atol=1e-5)
        g = _compile(lambda x: torch.cumsum(x, 0) - 1)
        torch.testing.assert_close(_run_twice(g, x), torch.cumsum(x, 0) - 1)
    lines = [r for r in caplog.records if "aten.cumsum" in r.getMessage()]
    assert len(lines) == 1  # once per operator, not per graph
    s = _summaries(before)[0]
    assert s.aten_ops == {"aten.cumsum.default": 1}
    assert s.kernels == 2  # exp before and the arithmetic after the ATen op


def test_compile_errors_fall_back_to_eager_only_when_allowed(monkeypatch, caplog):
    def broken(*a, **k):
        raise RuntimeError("injected planning failure")
    monkeypatch.setattr(graph_mod, "build_plan", broken)
    x = torch.randn(5)
    f = _compile(lambda x: x * 3, options={"fallback": True})
    with caplog.at_level(logging.WARNING, logger="tessera"):
        reset_log_once()
        torch.testing.assert_close(_run_twice(f, x), x * 3)
    assert "injected planning failure" in caplog.text
    g = _compile(lambda x: x * 4, options={"fallback": False})
    with pytest.raises(Exception, match="injected planning failure"):
        g(x)
    torch._dynamo.reset()


def test_partition_that_fails_to_compile_runs_through_aten(monkeypatch):
    from tessera.backend import plan as plan_mod
    real = plan_mod.compile_spec

    def flaky(spec, *args):
        if "sigmoid" in spec.name:
            raise RuntimeError("injected kernel failure")
        return real(spec, *args)
    monkeypatch.setattr(plan_mod, "compile_spec", flaky)
    before = _graph_ids()
    f = _compile(lambda x: torch.sigmoid(torch.cumsum(x, 0)) + torch.exp(x))
    x = torch.randn(4, 4)
    torch.testing.assert_close(_run_twice(f, x), torch.sigmoid(torch.cumsum(x, 0)) + torch.exp(x))
    (s,) = _summaries(before)
    assert any("injected kernel failure" in m for m in s.failures)


# ---- choices by measurement ----------------------------------------------------------------

def test_anchor_partitions_are_measured_and_decisions_cached(monkeypatch):
    calls = []
    real = anchor_choice.measure

    def counting(candidates):
        calls.append(sorted(candidates))
        return real(candidates)
    monkeypatch.setattr(anchor_choice, "measure", counting)
    anchor_choice.clear_decisions()
    w = torch.randn(32, 48)

    def fn(x):
        return torch.relu(x @ w) * 0.5
    before = _graph_ids()
    f = _compile(fn, options={"anchor_measure": True})
    x = torch.randn(20, 32)
    torch.testing.assert_close(_run_twice(f, x), fn(x), rtol=1e-4, atol=1e-4)
    assert calls == [["aten", "split", "tessera"]]
    (s,) = _summaries(before)
    (choice,) = s.anchors
    assert choice["choice"] in ("tessera", "split", "aten")
    assert set(choice["times_ms"]) == {"tessera", "split", "aten"}
    # Same structure and shapes in a new graph: the cached decision, no new measurement.
    f2 = _compile(fn, options={"anchor_measure": True})
    torch.testing.assert_close(_run_twice(f2, x), fn(x), rtol=1e-4, atol=1e-4)
    assert len(calls) == 1


def test_choice_prefers_aten_unless_tessera_is_clearly_faster():
    choose = anchor_choice.choose
    margin = tessera._C.tuning_policy().win_margin
    assert 0.9 < margin < 1.0
    assert choose({"tessera": 1.0, "aten": 1.01}) == "aten"
    assert choose({"tessera": 0.5, "aten": 1.0}) == "tessera"
    # Anchor partitions: ATen's anchor + a rest kernel, or all fused, each against all-ATen.
    times = {"aten": 1.2, "split": 1.1}
    assert choose(times) == "split"
    assert choose(dict(times, split=1.2 * margin + 1e-6)) == "aten"  # within the margin
    assert choose(dict(times, tessera=1.05)) == "tessera"            # the fastest winner
    assert choose({"aten": 1.0, "tessera": 2.0, "split": 0.99}) == "aten"


def test_kernels_are_cached_by_structure_and_shape():
    def block(x):
        return torch.tanh(x * 1.5 + 0.25)
    x = torch.randn(8, 8)
    f = _compile(block)
    _run_twice(f, x)
    hits = backend.kernel_stats["cache_hits"]
    g = _compile(lambda x: torch.tanh(x * 1.5 + 0.25))  # a different graph, same structure
    torch.testing.assert_close(_run_twice(g, x), block(x))
    assert backend.kernel_stats["cache_hits"] == hits + 1


# ---- inputs ------------------------------------------------------------------------------

def test_non_contiguous_and_broadcast_inputs():
    def fn(a, b, c):
        return torch.relu(a * b + c)
    f = _compile(fn)
    a = torch.randn(12, 7).t()                   # transposed
    b = torch.randn(1, 12).expand(7, 12)         # broadcast (stride 0)
    c = torch.randn(7, 24)[:, ::2]               # strided with gaps
    assert not a.is_contiguous() and not c.is_contiguous()
    torch.testing.assert_close(_run_twice(f, a, b, c), fn(a, b, c))


def test_transposed_weight_reaches_the_matmul_without_a_copy():
    w = torch.randn(24, 40)  # used as w.t(): physically [N, K]

    def fn(x):
        return x @ w.t() + 1
    f = _compile(fn)
    x = torch.randn(10, 40)
    torch.testing.assert_close(_run_twice(f, x), fn(x), rtol=1e-4, atol=1e-4)


def test_channels_last_input_keeps_eager_output_strides():
    conv = torch.nn.Conv2d(4, 6, 3, padding=1)
    bn = torch.nn.BatchNorm2d(6).eval()

    def fn(x):
        return torch.relu(bn(conv(x)))
    x = torch.randn(2, 4, 9, 9).to(memory_format=torch.channels_last)
    f = _compile(fn)
    with torch.no_grad():
        want = fn(x)
        got = _run_twice(f, x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert got.stride() == want.stride()


def test_zero_size_dims():
    def fn(x, y):
        return (x * 2).sum(dim=1) + y.mean()
    f = _compile(fn, dynamic=False)
    x, y = torch.randn(0, 5), torch.randn(3)
    torch.testing.assert_close(_run_twice(f, x, y), fn(x, y))
    g = _compile(lambda x: torch.exp(x) + 1)
    z = torch.randn(4, 0, 3)
    assert _run_twice(g, z).shape == (4, 0, 3)


def test_scalars_and_zero_dim_tensors():
    def fn(x, s, k: float):
        return x * s + k - torch.tensor(0.5) + s.exp()
    f = _compile(fn)
    x, s = torch.randn(3, 4), torch.tensor(1.7)
    torch.testing.assert_close(_run_twice(f, x, s, 2.5), fn(x, s, 2.5))
    g = _compile(lambda x: (x * x).sum())  # 0-d output
    out = _run_twice(g, x)
    assert out.dim() == 0
    torch.testing.assert_close(out, (x * x).sum())


def test_other_dtypes_run_through_aten(caplog):
    def fn(x):
        return torch.tanh(x) * 2
    reset_log_once()
    before = _graph_ids()
    with caplog.at_level(logging.INFO, logger="tessera"):
        f = _compile(fn)
        x = torch.randn(5, 3, dtype=torch.float64)
        got = _run_twice(f, x)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, fn(x))
    assert "torch.float64" in caplog.text
    assert sum(s.kernels for s in _summaries(before)) == 0


def test_int_and_bool_tensors_inside_kernels():
    emb = torch.randn(20, 6)

    def fn(ids, mask):
        e = torch.nn.functional.embedding(ids, emb)
        return torch.where(mask.unsqueeze(-1), e * 2, torch.zeros_like(e)) + (ids > 5).unsqueeze(-1)
    f = _compile(fn)
    ids = torch.randint(0, 20, (3, 5))
    mask = torch.rand(3, 5) > 0.5
    torch.testing.assert_close(_run_twice(f, ids, mask), fn(ids, mask))

    def ints(x):  # integer arithmetic and clamp stay integer; bool and int outputs
        return torch.clamp(x * 3 - 4, 0, 20) // 1, x > 2, (x + 1).to(torch.int32)
    g = _compile(ints)
    x = torch.randint(-5, 10, (4, 6))
    for got, want in zip(_run_twice(g, x), ints(x)):
        assert got.dtype == want.dtype
        assert torch.equal(got, want)


def test_dynamic_shapes_recompile_per_shape():
    def fn(x):
        return torch.softmax(x * 2, dim=-1) + x.sum(0)
    f = _compile(fn, dynamic=True)
    for shape in [(3, 8), (5, 8), (5, 13), (3, 8)]:
        x = torch.randn(*shape)
        torch.testing.assert_close(_run_twice(f, x), fn(x), rtol=1e-5, atol=1e-6)


def test_mark_dynamic():
    lin = torch.nn.Linear(16, 8)

    def fn(x):
        return torch.nn.functional.gelu(lin(x))
    f = _compile(fn)
    x = torch.randn(4, 16)
    torch._dynamo.mark_dynamic(x, 0)
    with torch.no_grad():
        for b in (4, 7, 2):
            xb = torch.randn(b, 16)
            torch.testing.assert_close(_run_twice(f, xb), fn(xb), rtol=1e-4, atol=1e-4)


def test_training_step_gradients_match():
    torch.manual_seed(0)
    lin1, lin2 = torch.nn.Linear(12, 20), torch.nn.Linear(20, 3)
    params = list(lin1.parameters()) + list(lin2.parameters())

    def loss_fn(x, t):
        h = torch.nn.functional.layer_norm(torch.tanh(lin1(x)), (20,))
        return torch.nn.functional.cross_entropy(lin2(h), t)
    x, t = torch.randn(9, 12), torch.randint(0, 3, (9,))
    f = _compile(loss_fn)
    grads = []
    for fn in (loss_fn, f, f):
        for p in params:
            p.grad = None
        fn(x, t).backward()
        grads.append([p.grad.clone() for p in params])
    for g_eager, g_compiled in zip(grads[0], grads[2]):
        torch.testing.assert_close(g_compiled, g_eager, rtol=1e-4, atol=1e-5)


def test_tessera_package_still_exports_its_api():
    for name in ("Kernel", "placeholder", "size_var", "te_ops", "backend"):
        assert hasattr(tessera, name)


def test_timed_aten_candidates_free_their_outputs(monkeypatch):
    """Planning runs with the cyclic collector paused (gc_pause.py): a candidate that left its
    outputs in a reference cycle would keep every timed call's tensors alive, and each call
    would fault fresh pages in (a relu timed at 20x its real cost, biasing every choice)."""
    import gc
    import weakref
    from tessera.backend import anchor
    leaked = []
    original = anchor.measure

    def spy(candidates):
        gc.disable()
        try:
            out = candidates["aten"]()
            refs = [weakref.ref(t) for t in (out if isinstance(out, (list, tuple)) else [out])
                    if isinstance(t, torch.Tensor)]
            del out
            leaked.append(sum(r() is not None for r in refs))
        finally:
            gc.enable()
        return original(candidates)
    monkeypatch.setattr(anchor, "measure", spy)
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                                torch.nn.ReLU()).eval()
    x = torch.randn(1, 8, 12, 12)
    with torch.no_grad():
        torch._dynamo.reset()
        f = torch.compile(model, backend="tessera", options={"records_db": False})
        torch.testing.assert_close(f(x), model(x), rtol=1e-4, atol=1e-4)
    assert leaked and not any(leaked), leaked
