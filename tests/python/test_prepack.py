"""Weights prepacked once (options prepack_weights, kernel_build.PackedInput).

In an inference graph, a kernel that packs a weight into panels reads a packed copy made once
instead of packing it on every call; the copy is made again when the weight changes in place
(its version counter moves). Every result is compared with eager PyTorch.
"""

import copy

import pytest
import torch
import torch.nn as nn

from tessera.backend import kernel_build
from tessera.backend import program_runner

KERNELS = {"anchor_measure": False, "fallback": False}


# The images' side: not a multiple of a vector width (8 or 16 lanes), so the rules vectorise the
# convolutions along their output channels on every host, and pack the weights.
SIDE = 12


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(32, 32, 3, padding=1), nn.Flatten(),
                         nn.Linear(32 * SIDE * SIDE, 64)).eval()


def _packs() -> int:
    return kernel_build.stats["weight_packs"]


def _prepacked_kernels() -> int:
    return sum(1 for k in kernel_build.cached_kernels() if k.prepacks)


@pytest.fixture(params=[True, False], ids=["program", "kernel-calls"])
def runner_kind(request, monkeypatch):
    """Both ways kernels run: C++ programs and one Python call per kernel."""
    monkeypatch.setattr(program_runner, "ENABLED", request.param)
    return request.param


def test_weights_are_packed_once_and_again_after_in_place_changes(runner_kind):
    torch._dynamo.reset()
    kernel_build.clear_cache()
    m = _model()
    x = torch.randn(2, 16, SIDE, SIDE)
    with torch.no_grad():
        f = torch.compile(m, backend="tessera", options=KERNELS)
        f(x)  # the first call runs eagerly and compiles
        assert _prepacked_kernels() > 0, "no kernel reads a weight prepacked: nothing tested"
        before = _packs()
        for _ in range(3):
            torch.testing.assert_close(f(x), m(x), rtol=1e-4, atol=1e-4)
        first = _packs() - before
        assert first > 0
        for _ in range(3):
            f(x)
        assert _packs() - before == first, "unchanged weights were packed again"
        m[0].weight.mul_(0.5)  # in place: same tensor, new version
        torch.testing.assert_close(f(x), m(x), rtol=1e-4, atol=1e-4)
        assert _packs() - before > first
        state = {k: v * 1.5 for k, v in m.state_dict().items()}
        m.load_state_dict(state)  # copies into the same tensors
        torch.testing.assert_close(f(x), m(x), rtol=1e-4, atol=1e-4)


def test_a_replaced_parameter_is_packed_from_the_new_tensor():
    torch._dynamo.reset()
    m = _model()
    x = torch.randn(1, 16, SIDE, SIDE)
    with torch.no_grad():
        f = torch.compile(m, backend="tessera", options=KERNELS)
        f(x)
        f(x)
        m[2].weight = nn.Parameter(torch.randn_like(m[2].weight))
        torch.testing.assert_close(f(x), m(x), rtol=1e-4, atol=1e-4)


def test_prepacking_off_and_training_graphs_pack_per_call():
    torch._dynamo.reset()
    kernel_build.clear_cache()
    m = _model()
    x = torch.randn(1, 16, SIDE, SIDE)
    with torch.no_grad():
        f = torch.compile(copy.deepcopy(m), backend="tessera",
                          options=dict(KERNELS, prepack_weights=False))
        f(x)
        torch.testing.assert_close(f(x), m(x), rtol=1e-4, atol=1e-4)
    assert _prepacked_kernels() == 0
    torch._dynamo.reset()
    kernel_build.clear_cache()
    m.train()
    g = torch.compile(m, backend="tessera", options=KERNELS)  # a forward graph for autograd
    g(x).sum().backward()
    g(x)
    assert _prepacked_kernels() == 0


def test_kernel_weights_argument_prepacks_and_sees_changes():
    import tessera
    x = tessera.placeholder("X", [1, 8, 10, 10])
    w = tessera.placeholder("W", [16, 8, 3, 3])
    out = tessera.te_ops.conv2d(x, w, None, (1, 1), (1, 1), (1, 1), 1)
    plain = tessera.Kernel([out], [x, w])
    packs_w = [st for st in plain.schedule.stages if "W" in st.pack]
    sched = plain.schedule.copy()
    if not packs_w:  # make the schedule pack W, so that there is something to prepack
        for st in sched.stages:
            if st.vector_axis >= 0 and len(st.tile_reg) > 0 and st.op == out.name:
                st.pack = list(st.pack) + ["W"]
    k = tessera.Kernel([out], [x, w], schedule=sched, weights=[1])
    assert k._kernel.prepacks, "the schedule packs W: the kernel must read it prepacked"
    xs, ws = torch.randn(1, 8, 10, 10), torch.randn(16, 8, 3, 3)
    want = torch.nn.functional.conv2d(xs, ws, padding=1)
    torch.testing.assert_close(k(xs, ws), want, rtol=1e-4, atol=1e-4)
    ws.mul_(-2.0)
    torch.testing.assert_close(k(xs, ws), torch.nn.functional.conv2d(xs, ws, padding=1),
                               rtol=1e-4, atol=1e-4)
    other = torch.randn(16, 8, 3, 3)  # another tensor altogether
    torch.testing.assert_close(k(xs, other), torch.nn.functional.conv2d(xs, other, padding=1),
                               rtol=1e-4, atol=1e-4)


def test_candidates_are_timed_with_weights_like_the_models():
    """The planner times a partition's candidates on example tensors made from the recorded
    metas. A weight that is a normal tensor (a model made outside inference mode, called under
    it) is packed once in the model, so its example must be one too: an inference tensor has no
    version counter and would be packed on every timed call, a cost the model never pays. A
    weight that is an inference tensor is packed every call in the model, and its example too."""
    from tessera.backend.meta import describe
    weight = torch.randn(8, 8)
    with torch.inference_mode():
        made_inside = torch.randn(8, 8)
        plain, inference = describe(weight), describe(made_inside)
        assert not plain.inference and inference.inference
        assert plain == inference  # the flag is not part of a meta's identity
        assert not plain.example().is_inference()
        assert inference.example().is_inference()


def test_inference_mode_calls_pack_weights_made_outside_it_once(caplog):
    model = _model()
    x = torch.randn(2, 16, SIDE, SIDE)
    with torch.no_grad():
        want = model(x)
    fast = torch.compile(copy.deepcopy(model), backend="tessera", options=KERNELS)
    with torch.inference_mode():
        torch.testing.assert_close(fast(x), want, rtol=1e-4, atol=1e-4)
        assert _prepacked_kernels() > 0
        before = _packs()
        for _ in range(3):
            torch.testing.assert_close(fast(x), want, rtol=1e-4, atol=1e-4)
        assert _packs() == before


def test_weights_made_under_inference_mode_are_packed_every_call_with_a_warning(caplog):
    from tessera.backend.log import reset_log_once
    reset_log_once()
    model = _model()
    x = torch.randn(2, 16, SIDE, SIDE)
    with torch.inference_mode():
        want = model(x)
        frozen = copy.deepcopy(model)  # its weights are inference tensors: no version counter
        fast = torch.compile(frozen, backend="tessera", options=KERNELS)
        with caplog.at_level("WARNING", logger="tessera"):
            torch.testing.assert_close(fast(x), want, rtol=1e-4, atol=1e-4)
            before = _packs()
            torch.testing.assert_close(fast(x), want, rtol=1e-4, atol=1e-4)
            assert _packs() > before  # nothing tells a changed weight from an unchanged one
            frozen[0].weight.mul_(2)  # allowed on an inference tensor under inference mode
            torch.testing.assert_close(fast(x), _changed(model, x), rtol=1e-4, atol=1e-4)
        assert any("inference tensor" in r.getMessage() for r in caplog.records)


def _changed(model, x):
    changed = copy.deepcopy(model)
    with torch.no_grad():
        changed[0].weight.mul_(2)
        return changed(x)
