"""Kernels compiled from tensor expressions and called with torch tensors, vs eager PyTorch."""

import json

import pytest
import torch

import tessera
from tessera import te_ops as ops


def _rand(*shape):
    return torch.randn(*shape, dtype=torch.float32)


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (17, 33, 9), (64, 64, 64), (100, 130, 257)])
def test_matmul_matches_torch(m, n, k):
    A, B = tessera.placeholder("A", [m, k]), tessera.placeholder("B", [k, n])
    kernel = tessera.Kernel([ops.matmul(A, B)], [A, B])
    a, b = _rand(m, k), _rand(k, n)
    torch.testing.assert_close(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_dense_bias_relu_is_one_fused_kernel():
    X, W, Bias = (tessera.placeholder("X", [20, 48]), tessera.placeholder("W", [30, 48]),
                  tessera.placeholder("bias", [30]))
    kernel = tessera.Kernel([ops.relu(ops.dense(X, W, Bias))], [X, W, Bias])
    assert len(kernel.schedule.stages) == 1
    x, w, b = _rand(20, 48), _rand(30, 48), _rand(30)
    torch.testing.assert_close(kernel(x, w, b), torch.relu(x @ w.T + b), rtol=1e-4, atol=1e-4)


def test_softmax_layer_norm_conv():
    X = tessera.placeholder("X", [6, 70])
    x = _rand(6, 70)
    sm = tessera.Kernel([ops.softmax(X, -1)], [X])
    torch.testing.assert_close(sm(x), torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
    G, Bt = tessera.placeholder("g", [70]), tessera.placeholder("b", [70])
    ln = tessera.Kernel([ops.layer_norm(X, 1, G, Bt)], [X, G, Bt])
    g, b = _rand(70), _rand(70)
    torch.testing.assert_close(ln(x, g, b), torch.nn.functional.layer_norm(x, (70,), g, b),
                               rtol=1e-4, atol=1e-4)
    I, Wc = tessera.placeholder("I", [2, 3, 12, 12]), tessera.placeholder("Wc", [8, 3, 3, 3])
    conv = tessera.Kernel([ops.conv2d(I, Wc, None, (2, 2), (1, 1))], [I, Wc])
    i, wc = _rand(2, 3, 12, 12), _rand(8, 3, 3, 3)
    torch.testing.assert_close(conv(i, wc), torch.nn.functional.conv2d(i, wc, stride=2, padding=1),
                               rtol=1e-4, atol=1e-4)


def test_symbolic_size_serves_many_shapes():
    M = tessera.size_var("M", 1, 10000)
    A, B = tessera.placeholder("A", [M, 16]), tessera.placeholder("B", [16, 24])
    kernel = tessera.Kernel([ops.matmul(A, B)], [A, B])
    b = _rand(16, 24)
    for m in (1, 5, 64, 333, 5, 1):  # shapes seen before take the cached sizes
        a = _rand(m, 16)
        torch.testing.assert_close(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_non_contiguous_inputs_are_handled():
    A, B = tessera.placeholder("A", [8, 8]), tessera.placeholder("B", [8, 8])
    kernel = tessera.Kernel([ops.add(A, B)], [A, B])
    a, b = _rand(8, 8).t(), _rand(8, 8)[:, :]
    assert not a.is_contiguous()
    torch.testing.assert_close(kernel(a, b), a + b)


def test_bad_inputs_raise_clear_errors():
    A, B = tessera.placeholder("A", [4, 5]), tessera.placeholder("B", [5, 6])
    kernel = tessera.Kernel([ops.matmul(A, B)], [A, B])
    kernel(_rand(4, 5), _rand(5, 6))  # a good call first: its cached shapes must not mask checks
    with pytest.raises(TypeError, match="dtype"):
        kernel(_rand(4, 5).double(), _rand(5, 6))
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        kernel(_rand(4, 5), [[0.0] * 6] * 5)
    with pytest.raises(ValueError, match="CPU kernels take CPU tensors"):
        kernel(_rand(4, 5).to("meta"), _rand(5, 6))
    with pytest.raises(ValueError, match="out tensor"):
        kernel(_rand(4, 5), _rand(5, 6), out=[_rand(4, 7)])
    with pytest.raises(ValueError, match="out tensor"):
        kernel(_rand(4, 5), _rand(5, 6), out=[_rand(6, 4).t()])
    with pytest.raises(RuntimeError, match="dim 1 is 7"):
        kernel(_rand(4, 7), _rand(5, 6))
    with pytest.raises(TypeError, match="takes 2 inputs"):
        kernel(_rand(4, 5))
    with pytest.raises(RuntimeError, match="schedule"):
        tessera.Kernel([ops.matmul(A, B)], [A, B], schedule='{"stages": []}')


def test_schedule_json_round_trips_into_an_equal_kernel():
    A, B = tessera.placeholder("A", [40, 50]), tessera.placeholder("B", [50, 60])
    first = tessera.Kernel([ops.matmul(A, B)], [A, B])
    sched = json.loads(first.schedule.dump())
    sched["stages"][0]["tile_reduce"] = [7]  # a different, still valid, schedule
    second = tessera.Kernel([ops.matmul(A, B)], [A, B], schedule=json.dumps(sched))
    assert second.schedule.stages[0].tile_reduce == [7]
    assert second.report.source == "given" and first.report.source == "rules"
    # The typed schedule edits the same way and builds the same kernel.
    typed = first.schedule.copy()
    stage = typed.stages[0]
    stage.tile_reduce = [7]
    typed.stages = [stage]
    assert typed == second.schedule
    third = tessera.Kernel([ops.matmul(A, B)], [A, B], schedule=typed)
    assert third.loop_ir == second.loop_ir
    a, b = _rand(40, 50), _rand(50, 60)
    torch.testing.assert_close(second(a, b), first(a, b), rtol=1e-5, atol=1e-5)
    assert first.report.parallel and "parallel for" in first.loop_ir
    # The backend's choice for a kernel this small: the calling thread alone (the tuning
    # policy's serial_bytes).
    auto = tessera.Kernel([ops.matmul(A, B)], [A, B], threads="auto")
    assert not auto.report.parallel and "parallel for" not in auto.loop_ir


def test_machine_facts():
    peak = json.loads(tessera._C.peak_info())
    assert peak["fp32_gflops_all"] > 0 and peak["mem_bw_gbs_all"] > 0
    hw = json.loads(tessera._C.hardware())
    assert hw["num_cores"] >= 1 and hw["caches"]
    assert tessera.get_num_threads() == torch.get_num_threads()


def test_keep_source_keeps_llvm_ir_and_assembly():
    a, b = tessera.placeholder("A", [64, 48]), tessera.placeholder("B", [48, 80])
    kept = tessera.Kernel([ops.matmul(a, b)], [a, b], keep_source=True)
    assert "define" in kept.llvm_ir and ("fma" in kept.llvm_ir or "fmul" in kept.llvm_ir)
    assert ".globl" in kept.assembly and ("vfmadd" in kept.assembly or "mulps" in kept.assembly)
    plain = tessera.Kernel([ops.matmul(a, b)], [a, b])
    assert plain.llvm_ir == "" and plain.assembly == ""
    x, y = torch.randn(64, 48), torch.randn(48, 80)
    torch.testing.assert_close(kept(x, y), x @ y, rtol=1e-4, atol=1e-4)
