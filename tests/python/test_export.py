"""tessera.export: a model compiled ahead of time from torch.export's graph, called without
Dynamo. Every result is compared with eager PyTorch, and every call it must refuse is refused
with ExportError."""

import pytest
import torch
import torch.nn as nn
from torch.export import Dim

import tessera
from tessera import ExportedModel, ExportError
from tessera.backend import kernel_build

KERNELS = {"anchor_measure": False, "fallback": False}


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 16)).eval()


def _kernels(e: ExportedModel) -> int:
    return sum(s.kernels for s in e.compiled_graph.summaries.values())


def test_an_exported_model_matches_eager_through_tessera_kernels():
    m = _mlp()
    x = torch.randn(8, 32)
    e = tessera.export(m, (x,), options=KERNELS)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(e(x), m(x), rtol=1e-4, atol=1e-4)
        assert _kernels(e) > 0, "nothing was compiled: the test would pass on eager"
        x2 = torch.randn(8, 32)  # new values, same signature: the fast path
        torch.testing.assert_close(e(x2), m(x2), rtol=1e-4, atol=1e-4)


def test_parameters_changed_in_place_are_seen_and_packed_copies_renewed():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.Flatten(),
                      nn.Linear(16 * 6 * 6, 10)).eval()
    x = torch.randn(2, 8, 6, 6)
    kernel_build.clear_cache()
    e = tessera.export(m, (x,), options=KERNELS)
    with torch.no_grad():
        torch.testing.assert_close(e(x), m(x), rtol=1e-4, atol=1e-4)
        assert any(k.prepacks for k in kernel_build.cached_kernels()), \
            "no kernel reads a weight prepacked: the in-place case is not tested"
        m[0].weight.mul_(0.5)
        m[3].bias.add_(1.0)
        torch.testing.assert_close(e(x), m(x), rtol=1e-4, atol=1e-4)


def test_buffers_and_constants_are_read_from_the_model():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(4, 8, 3), nn.BatchNorm2d(8), nn.ReLU()).eval()
    with torch.no_grad():
        m[1].running_mean.uniform_(-1, 1)
        m[1].running_var.uniform_(0.5, 2)
    x = torch.randn(1, 4, 10, 10)
    e = tessera.export(m, (x,), options=KERNELS)
    with torch.no_grad():
        torch.testing.assert_close(e(x), m(x), rtol=1e-4, atol=1e-4)
        m[1].running_mean.add_(0.25)  # a buffer changed in place
        torch.testing.assert_close(e(x), m(x), rtol=1e-4, atol=1e-4)


def test_functions_kwargs_and_nested_outputs():
    def fn(a, b, *, scale):
        s = torch.tanh(a @ b) * scale
        return {"sum": s.sum(-1), "parts": (s, torch.relu(a))}
    a, b, scale = torch.randn(4, 8), torch.randn(8, 6), torch.randn(6)
    e = tessera.export(fn, (a, b), {"scale": scale}, options=KERNELS)
    for _ in range(2):
        got, want = e(a, b, scale=scale), fn(a, b, scale=scale)
        assert set(got) == {"sum", "parts"} and isinstance(got["parts"], tuple)
        torch.testing.assert_close(got["sum"], want["sum"], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(got["parts"][0], want["parts"][0], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(got["parts"][1], want["parts"][1])
    with pytest.raises(ExportError, match="structured"):
        e(a, b)  # scale missing


def test_other_strides_get_their_own_runner():
    m = _mlp()
    x = torch.randn(8, 32)
    e = tessera.export(m, (x,), options=KERNELS)
    xt = torch.randn(32, 8).t()  # same shape, transposed strides
    with torch.no_grad():
        e(x)
        for _ in range(2):
            torch.testing.assert_close(e(xt), m(xt), rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(e(x), m(x), rtol=1e-4, atol=1e-4)


def test_calls_it_cannot_serve_are_refused():
    m = _mlp()
    x = torch.randn(8, 32)
    e = tessera.export(m, (x,), options=KERNELS)
    with torch.no_grad():
        e(x)
        with pytest.raises(ExportError, match=r"shape \(8, 32\), got \(9, 32\)"):
            e(torch.randn(9, 32))
        with pytest.raises(ExportError, match="float64"):
            e(x.double())
        with pytest.raises(ExportError, match="must be a tensor"):
            e(3.0)
    with pytest.raises(ExportError, match="inference only"):
        e(x.clone().requires_grad_())  # grad mode on and an input that requires grad
    with torch.no_grad():  # under no_grad the same input is fine
        torch.testing.assert_close(e(x.clone().requires_grad_()), m(x), rtol=1e-4, atol=1e-4)


def test_models_that_mutate_buffers_are_refused_at_export():
    m = nn.Sequential(nn.Conv2d(4, 8, 3), nn.BatchNorm2d(8)).train()
    with pytest.raises(ExportError, match="mutates"):
        tessera.export(m, (torch.randn(2, 4, 8, 8),))


def test_dynamic_dimensions_take_any_size_in_their_range_with_one_plan():
    from tessera.backend import graph as graph_mod
    m = _mlp()
    before = graph_mod.stats["range_plans"]
    e = tessera.export(m, (torch.randn(8, 32),),
                       dynamic_shapes=({0: Dim("rows", min=1, max=128)},), options=KERNELS)
    with torch.no_grad():
        for n in [8, 1, 37, 128, 5]:
            x = torch.randn(n, 32)
            torch.testing.assert_close(e(x), m(x), rtol=1e-4, atol=1e-4)
        assert graph_mod.stats["range_plans"] - before == 1
        with pytest.raises(ExportError, match=r"outside the exported \(1..128, 32\)"):
            e(torch.randn(129, 32))
        with pytest.raises(ExportError, match="outside"):
            e(torch.randn(8, 31))


def test_explain_reports_the_exported_graph():
    m = _mlp()
    x = torch.randn(8, 32)
    e = tessera.export(m, (x,), options=KERNELS)
    with torch.no_grad():
        e(x)
    text = str(tessera.explain(e))
    assert "inference" in text and "addmm" in text


def test_non_tensor_inputs_are_refused_at_export():
    with pytest.raises(ExportError, match="input 1 is a int"):
        tessera.export(lambda x, n: x * n, (torch.randn(4), 3))


class _ClonesAConstant(nn.Module):
    """Reads a constant through clones: one changed in place, one used as is, one returned."""

    def __init__(self):
        super().__init__()
        self.c = torch.arange(4.0)

    def forward(self, x):
        y = self.c.clone()
        y.add_(1.0)  # functionalised by export into add(c, 1): the clone is not needed
        return x * y + self.c.clone(), self.c.clone()


def test_clones_of_lifted_tensors_are_read_in_place_unless_returned():
    m = _ClonesAConstant()
    x = torch.randn(3, 4)
    e = tessera.export(m, (x,), options=KERNELS)
    clones = [n for n in e.compiled_graph.gm.graph.nodes
              if n.target is torch.ops.aten.clone.default]
    assert len(clones) == 1 and all(u.op == "output" for u in clones[0].users)
    for _ in range(2):
        (got, kept), (want, c) = e(x), m(x)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(kept, c)
        assert kept.data_ptr() != m.c.data_ptr(), "a returned clone must not alias the constant"
    assert torch.equal(m.c, torch.arange(4.0)), "the constant was written to"


def test_dtype_assertions_do_not_split_partitions():
    def fn(x):
        return torch.relu(x.to(torch.float32) * 2.0).to(torch.float32) + 1.0
    x = torch.randn(16)
    e = tessera.export(fn, (x,), options=KERNELS)
    assert not any(n.target is torch.ops.aten._assert_tensor_metadata.default
                   for n in e.compiled_graph.gm.graph.nodes)
    torch.testing.assert_close(e(x), fn(x))
