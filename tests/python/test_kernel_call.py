"""_C.KernelCall: a size-generic kernel called with torch tensors in one C++ step (the fast path
of kernel_build.KernelCall for range plans). Checked against torch: contiguous and strided
inputs, packed weights (the call declines while a copy is stale, and the Python path packs it
again), and a range plan under torch.compile whose kernels run through it."""

import gc

import torch

import tessera
from tessera import _C
from tessera.backend import kernel_build


def _dense_kernel(weights=(1,), k: int = 48, n: int = 40):
    m = tessera.size_var("M", 1, 4096)
    x = tessera.placeholder("X", [m, k])
    w = tessera.placeholder("W", [n, k])
    y = tessera.te_ops.dense(x, w)
    return tessera.Kernel([y], [x, w], name="dense_call", weights=list(weights))


def test_call_matches_torch_for_contiguous_and_strided_inputs():
    kernel = _dense_kernel(weights=())
    fast = _C.KernelCall(kernel._kernel.runner(), [None, None], [torch.float32])
    w = torch.randn(40, 48)
    for m in (1, 7, 64, 333):
        x = torch.randn(m, 48)
        strided = torch.randn(48, m).t()  # not contiguous: copied first
        for xin in (x, strided):
            torch.testing.assert_close(fast((m,), (xin, w)), xin @ w.t(), rtol=1e-4, atol=1e-4)
    assert (fast.calls, fast.declined) == (8, 0)


def test_a_stale_packed_weight_declines_until_packed_again():
    kernel = _dense_kernel()
    assert kernel._kernel.prepacks, "the dense kernel reads its weight packed"
    shared = kernel._packed[1].shared
    fast = _C.KernelCall(kernel._kernel.runner(), [None, shared], [torch.float32])
    w = torch.randn(40, 48)
    x = torch.randn(10, 48)
    assert fast((10,), (x, w)) is None  # nothing packed yet
    kernel(x, w)  # the Python path packs it
    torch.testing.assert_close(fast((10,), (x, w)), x @ w.t(), rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        w.mul_(-2.0)
    assert fast((10,), (x, w)) is None  # changed in place: stale
    kernel(x, w)
    torch.testing.assert_close(fast((10,), (x, w)), x @ w.t(), rtol=1e-4, atol=1e-4)
    assert (fast.calls, fast.declined) == (2, 2)


def _range_calls():
    """Every size-generic KernelCall alive (the range plans' kernels)."""
    return [o for o in gc.get_objects()
            if type(o) is kernel_build.KernelCall and o.symbolic]  # noqa: E721 (no proxies)


def test_range_plan_kernels_run_in_cpp_and_repack_after_a_change():
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(),
                                torch.nn.Linear(64, 16)).eval()
    fn = torch.compile(model, backend="tessera", dynamic=True, options={"records_db": False})
    with torch.no_grad():
        for n in (5, 9, 3, 200, 17):
            x = torch.randn(n, 32)
            torch.testing.assert_close(fn(x), model(x), rtol=1e-4, atol=1e-4)
        fast = [c._fast for c in _range_calls() if c._fast is not None]
        assert fast, "no range-plan kernel has the C++ call"
        ran = sum(f.calls for f in fast)
        assert ran > 0
        model[0].weight.mul_(0.5)
        for n in (6, 40):
            x = torch.randn(n, 32)
            torch.testing.assert_close(fn(x), model(x), rtol=1e-4, atol=1e-4)
        assert sum(f.declined for f in fast) >= 1
        assert sum(f.calls for f in fast) > ran
    torch._dynamo.reset()
