"""Construct mode (Gensor, and the Roller baseline) from Python: _C.construct returns a schedule
that compiles to a kernel matching eager PyTorch, plus predicted and measured times."""

import json

import pytest
import torch
import torch.nn.functional as F

import tessera
from tessera import te_ops as ops

pytestmark = pytest.mark.skipif(not hasattr(tessera._C, "construct"),
                                reason="tessera._C was built without bind_tune")


def _rand(*shape):
    return torch.randn(*shape, dtype=torch.float32)


def _construct(outputs, inputs, **kw):
    kw.setdefault("top_k", 2)
    kw.setdefault("chains", 4)
    return tessera._C.construct(outputs, inputs, **kw)


@pytest.mark.parametrize("mode", ["gensor", "roller"])
def test_matmul_schedule_is_correct_and_measured(mode):
    A, B = tessera.placeholder("A", [65, 80]), tessera.placeholder("B", [80, 48])
    C = ops.matmul(A, B)
    r = _construct([C], [A, B], mode=mode, seed=3)
    assert set(r) >= {"schedule", "construct_s", "predicted", "measured", "chosen", "candidates"}
    sched = r["schedule"]
    # The chosen schedule is construct's or the rules' default (measured alongside the top-k).
    assert sched.tuner in (f"construct:{mode}", "default")
    # Top-2 in predicted order, then the rules' default schedule (unless it is among them).
    assert 1 <= len(r["predicted"]) <= 3 and len(r["measured"]) == len(r["predicted"])
    tuners = [c.tuner for c in r["candidates"]]
    top = [p for p, t in zip(r["predicted"], tuners) if t != "default"]
    assert top == sorted(top) and 1 <= len(top) <= 2
    assert tuners.count("default") <= 1 and (tuners[-1] == "default" or "default" not in tuners)
    # Without it: only construct's own candidates.
    r2 = _construct([C], [A, B], mode=mode, seed=3, include_default=False)
    assert r2["schedule"].tuner == f"construct:{mode}"
    assert all(c.tuner != "default" for c in r2["candidates"])
    assert all(m > 0 for m in r["measured"])  # both candidates built, verified and timed
    assert r["measured"][r["chosen"]] == min(r["measured"])
    assert r["construct_s"] > 0
    a, b = _rand(65, 80), _rand(80, 48)
    kernel = tessera.Kernel([C], [A, B], schedule=r["schedule"])
    torch.testing.assert_close(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_predict_only_measures_nothing_and_is_deterministic():
    A, B = tessera.placeholder("A", [64, 64]), tessera.placeholder("B", [64, 64])
    C = ops.matmul(A, B)
    r1 = _construct([C], [A, B], predict_only=True, seed=7)
    r2 = _construct([C], [A, B], predict_only=True, seed=7)
    assert r1["measured"] == [-1.0] * len(r1["predicted"])
    assert r1["chosen"] == 0 and r1["measure_s"] == 0
    assert r1["schedule"] == r2["schedule"]
    meta = json.loads(r1["metadata"])
    assert meta["predict_only"] and meta["mode"] == "gensor" and meta["states_visited"] > 0


def test_conv_pool_bmm_gemv():
    X, W = tessera.placeholder("X", [1, 8, 14, 14]), tessera.placeholder("W", [16, 8, 3, 3])
    Y = ops.conv2d(X, W, None, (1, 1), (1, 1))
    r = _construct([Y], [X, W], eq1="printed", interleave=False)
    x, w = _rand(1, 8, 14, 14), _rand(16, 8, 3, 3)
    k = tessera.Kernel([Y], [X, W], schedule=r["schedule"])
    torch.testing.assert_close(k(x, w), F.conv2d(x, w, padding=1), rtol=1e-4, atol=1e-4)

    P = ops.avg_pool2d(X, (2, 2))
    k = tessera.Kernel([P], [X], schedule=_construct([P], [X])["schedule"])
    torch.testing.assert_close(k(x), F.avg_pool2d(x, 2), rtol=1e-5, atol=1e-6)

    Q, Kt = tessera.placeholder("Q", [3, 20, 16]), tessera.placeholder("K", [3, 24, 16])
    S = ops.batch_matmul(Q, Kt, False, True)
    k = tessera.Kernel([S], [Q, Kt], schedule=_construct([S], [Q, Kt], mode="roller")["schedule"])
    q, kt = _rand(3, 20, 16), _rand(3, 24, 16)
    torch.testing.assert_close(k(q, kt), q @ kt.transpose(1, 2), rtol=1e-4, atol=1e-4)

    V, M = tessera.placeholder("v", [1, 200]), tessera.placeholder("M", [50, 200])
    G = ops.dense(V, M)
    k = tessera.Kernel([G], [V, M], schedule=_construct([G], [V, M])["schedule"])
    v, m = _rand(1, 200), _rand(50, 200)
    torch.testing.assert_close(k(v, m)[0], m @ v[0], rtol=1e-4, atol=1e-4)


def test_bad_arguments_raise():
    A, B = tessera.placeholder("A", [8, 8]), tessera.placeholder("B", [8, 8])
    C = ops.matmul(A, B)
    with pytest.raises(RuntimeError, match="mode"):
        tessera._C.construct([C], [A, B], mode="ansor")
    with pytest.raises(RuntimeError, match="eq1"):
        tessera._C.construct([C], [A, B], eq1="squared")


def test_memory_hierarchy_description():
    h = json.loads(tessera._C.memory_hierarchy())
    names = [lv["name"] for lv in h["memory_levels"]]
    assert names == ["dram", "llc", "l2", "l1", "reg"]
    for lv in h["memory_levels"]:
        assert lv["bandwidth_gbs"] > 0 and lv["latency_ns"] >= 0
    dram, llc, l2, l1 = h["memory_levels"][:4]
    assert l2["capacity_bytes"] > l1["capacity_bytes"] > 0
    # An LLC the probe kept is larger than L2 and faster than DRAM; 0 means none was found.
    assert llc["capacity_bytes"] == 0 or (
        llc["capacity_bytes"] > l2["capacity_bytes"]
        and llc["bandwidth_gbs"] > dram["bandwidth_gbs"]
    )
    assert h["compute"]["fp32_gflops_core"] > 0
