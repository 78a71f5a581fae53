"""ALT layouts from Python (tessera.layouts, _C.layout).

The torch conversions of tessera.layouts are checked against kernels compiled from relaid DAGs
(the C++ maps are the definition): a relu whose input is relaid must give relu of the logical
input, and one whose output is relaid must give the relu stored in that layout. The joint tuner's
choice, run on converted inputs, must match eager PyTorch.
"""

import pytest
import torch

import tessera
from tessera import _C, layouts
from tessera import te_ops as ops
from tessera.kernel import Kernel

LAYOUTS = [
    ([2, 32, 5, 6], "split(1,16) reorder(0,1,3,4,2)"),
    ([2, 32, 5, 6], "reorder(0,2,3,1)"),
    ([32, 16, 3, 3], "split(0,8) split(2,4) reorder(0,2,4,5,3,1)"),
    ([3, 10, 7], "split(1,4) fuse(0)"),
    ([2, 3, 11, 11], "unfold(2,2,2,3) pad(4,1,2)"),
    ([6, 5], "store_at(1,2,9) reorder(1,0)"),
]


@pytest.mark.parametrize("shape,text", LAYOUTS)
def test_torch_conversions_match_the_compiled_maps(shape, text):
    x = torch.randn(shape)
    X = tessera.placeholder("X", shape)
    Y = ops.relu(X)
    # Input relaid: the kernel reads the physical tensor and must see the logical values.
    outs, ins, applied = _C.layout.apply([Y], [X], {"X": text}, propagate=False)
    assert applied == {"X": text}
    physical = layouts.to_physical(x, text)
    assert list(physical.shape) == layouts.physical_shape(shape, text)
    assert torch.equal(Kernel(outs, ins)(physical), torch.relu(x))
    # Output relaid: the kernel writes the physical layout; to_logical reads it back.
    outs, ins, _ = _C.layout.apply([Y], [X], {Y.name: text}, propagate=False)
    y = Kernel(outs, ins)(x)
    assert torch.equal(y, layouts.to_physical(torch.relu(x), text))
    assert torch.equal(layouts.to_logical(y, shape, text), torch.relu(x))


def test_unknown_primitive_and_name_are_clear_errors():
    with pytest.raises(ValueError, match="twist"):
        layouts.to_physical(torch.zeros(4, 4), "twist(0,2)")
    X = tessera.placeholder("X", [4, 4])
    with pytest.raises(RuntimeError, match="no tensor named Q"):
        _C.layout.apply([ops.relu(X)], [X], {"Q": "reorder(1,0)"})


@pytest.mark.parametrize("groups", [1, 32])
def test_joint_tuner_choice_matches_eager(groups):
    torch.manual_seed(0)
    X = tessera.placeholder("X", [1, 32, 10, 10])
    W = tessera.placeholder("W", [32, 32 // groups, 3, 3])
    Y = ops.conv2d(X, W, None, [1, 1], [1, 1], [1, 1], groups)
    names = [name for name, _ in _C.layout.candidates([Y], vector_lanes=16)]
    assert names[0] == "fixed" and len(names) >= 3
    r = _C.layout.tune([Y], [X, W], budget=8, per_layout=1, weights=["W"])
    assert r["layout_stage_measured"] + r["loop_stage_measured"] <= 8
    # The race re-timed the layout stage's fastest layouts together, the incumbent first.
    assert 2 <= len(r["race"]) <= 3 and r["race"][0][1] == 1.0
    assert r["chosen"] in [name for name, _ in r["race"]]
    assert r["schedule"].dump().count("layouts") == (1 if r["layouts"] else 0)
    x, w = torch.randn(1, 32, 10, 10), torch.randn(32, 32 // groups, 3, 3)
    lay = r["layouts"]
    k = Kernel(r["outputs"], r["inputs"], schedule=r["schedule"], weights=[1])
    y = k(layouts.to_physical(x, lay.get("X", "")), layouts.to_physical(w, lay.get("W", "")))
    out_name = Y.name
    if out_name in lay:
        y = layouts.to_logical(y, [1, 32, 10, 10], lay[out_name])
    want = torch.nn.functional.conv2d(x, w, padding=1, groups=groups)
    torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-4)


class _Block(torch.nn.Module):
    """conv-bn-relu, a residual conv, max pool, then a view into a linear layer."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(16)
        self.c2 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        y = torch.relu(self.bn(self.c1(x)))
        y = torch.relu(y + self.c2(y))
        y = torch.nn.functional.max_pool2d(y, 2)
        return self.fc(y.flatten(1)), y


def _compile_block(monkeypatch, force=None):
    """(candidates for NHWC, results of the compiled _Block and of eager, explain's text)."""
    from tessera.backend import plan
    chosen = []
    original = plan.channels_last_activations

    def spy(gm, metas, cls):
        new, nodes = original(gm, metas, cls)
        # Tuple metas (batch norm's result) change with the getitem that takes their tensor.
        chosen.append(sum(1 for n in metas
                          if new[n] is not metas[n] and not isinstance(metas[n], tuple)))
        assert chosen[-1] == len(nodes)
        return new, nodes
    monkeypatch.setattr(plan, "channels_last_activations", spy)
    if force:
        monkeypatch.setenv("TESSERA_FORCE_CHOICE", force)
    torch.manual_seed(0)
    model = _Block().eval()
    x = torch.randn(2, 8, 8, 8)
    with torch.no_grad():
        want = model(x)
        torch._dynamo.reset()
        f = torch.compile(model, backend="tessera", options={"layouts": True})
        got = f(x)
        got = f(x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
        assert g.stride() == w.stride()  # graph outputs keep eager's strides
    text = str(tessera.explain(f))
    torch._dynamo.reset()
    return chosen, text


def test_graph_layouts_store_conv_activations_nhwc_and_keep_results(monkeypatch):
    chosen, text = _compile_block(monkeypatch, force="tessera:nhwc")
    # conv1, bn, relu, conv2, add, relu at least; the pooled output is a graph output (kept).
    assert chosen and chosen[0] >= 4
    assert f"{chosen[0]} activations stored NHWC" in text
    model, x = _Block().eval(), torch.randn(2, 8, 8, 8)
    chosen.clear()
    with torch.no_grad():
        torch.compile(model, backend="tessera")(x)
    assert not chosen  # off by default


def test_each_convolution_measures_both_layouts_and_later_values_follow(monkeypatch):
    from tessera.backend import anchor as anchor_choice
    # Both convolutions' partitions kept NCHW: nothing computed from them is stored NHWC.
    chosen, text = _compile_block(monkeypatch, force="tessera:nchw")
    assert chosen and chosen[0] >= 4 and "stored NHWC" not in text
    assert text.count("tessera:nchw") == 2, text
    # Measured: each convolution's partition times its fused kernel in both layouts.
    monkeypatch.delenv("TESSERA_FORCE_CHOICE")
    anchor_choice.clear_decisions()
    chosen, text = _compile_block(monkeypatch)
    conv_rows = [r for r in text.splitlines() if "convolution" in r]
    assert len(conv_rows) == 2, text
    for row in conv_rows:
        assert "tessera:nhwc" in row and "tessera:nchw" in row, row


class _InvertedResidual(torch.nn.Module):
    """MobileNetV2's block: 1x1 expand, 3x3 depthwise, 1x1 project, each with batch norm."""

    def __init__(self, c=16, e=4):
        super().__init__()
        self.expand = torch.nn.Sequential(torch.nn.Conv2d(c, c * e, 1, bias=False),
                                          torch.nn.BatchNorm2d(c * e), torch.nn.ReLU6())
        self.depthwise = torch.nn.Sequential(
            torch.nn.Conv2d(c * e, c * e, 3, padding=1, groups=c * e, bias=False),
            torch.nn.BatchNorm2d(c * e), torch.nn.ReLU6())
        self.project = torch.nn.Sequential(torch.nn.Conv2d(c * e, c, 1, bias=False),
                                           torch.nn.BatchNorm2d(c))

    def forward(self, x):
        return x + self.project(self.depthwise(self.expand(x)))


def test_graph_layouts_carry_nhwc_through_batch_norm_and_read_weights_hwio(monkeypatch):
    """Batch norm's result (a getitem of its tuple) stays NHWC, so the depthwise convolution
    reads and writes channel vectors; its weight reaches the kernel in HWIO order, reordered
    once and again only when the weight changes in place."""
    from tessera.backend import kernel_build
    shapes = []
    original = kernel_build._C.compile

    def spy(outputs, inputs, request):
        shapes.append([list(t.shape) for t in inputs])
        return original(outputs, inputs, request)
    monkeypatch.setattr(kernel_build._C, "compile", spy)
    monkeypatch.setenv("TESSERA_FORCE_CHOICE", "tessera")
    torch.manual_seed(0)
    model = _InvertedResidual().eval()
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):  # non-trivial statistics
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
    x = torch.randn(1, 16, 10, 10)
    with torch.no_grad():
        torch._dynamo.reset()
        f = torch.compile(model, backend="tessera", options={"records_db": False})
        torch.testing.assert_close(f(x), model(x), rtol=1e-4, atol=1e-4)
        # The depthwise kernel: its activation input NHWC and its weight HWIO [3, 3, 1, 64].
        assert any([1, 10, 10, 64] in s and [3, 3, 1, 64] in s for s in shapes), shapes
        text = str(tessera.explain(f))
        # expand conv, its bn and relu6, the depthwise trio and the projecting conv and bn.
        stored = int(text.split(" activations stored NHWC")[0].rsplit(" ", 1)[1])
        assert stored >= 7, text
        # layouts=None stores them NHWC without measuring NCHW too (that is layouts=True).
        assert ":nchw" not in text, text
        model.depthwise[0].weight.mul_(-0.5)  # in place: the HWIO copy must follow
        torch.testing.assert_close(f(x), model(x), rtol=1e-4, atol=1e-4)
        # layouts=None (the default) chose NHWC for its depthwise convolution; False keeps NCHW.
        torch._dynamo.reset()
        g = torch.compile(model, backend="tessera",
                          options={"records_db": False, "layouts": False})
        torch.testing.assert_close(g(x), model(x), rtol=1e-4, atol=1e-4)
        assert "activations stored NHWC" not in str(tessera.explain(g))
