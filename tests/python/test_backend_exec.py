"""Executing compiled graphs: C++ Programs for runs of kernels, and graphs as custom operators.

Runs of consecutive Tessera kernels execute as one `_C.Program` call (program_runner.py) with
the intermediates in a liveness-planned arena; every compiled graph is also a torch.library
operator (graph_op.py) that survives torch.export and an enclosing torch.compile. Results are
compared with eager PyTorch throughout.
"""

import copy
import types

import pytest
import torch
import torch.nn as nn

import tessera
from tessera import _C
from tessera.backend import graph as graph_mod
from tessera.backend import program_runner
from tessera.backend.kernel_build import InputPrep, OutputSpec
from tessera.backend.options import Options
from tessera.backend.runner import Step
from tessera.models import TransformerBlock

KERNELS = {"anchor_measure": False, "fallback": False}


def compile_fn(fn, *args, options=KERNELS, **kw):
    """(compiled fn after two calls, the CompiledGraphs it made, newest last)."""
    torch._dynamo.reset()
    since = tessera.backend.last_serial()
    c = torch.compile(fn, backend="tessera", options=options, **kw)
    c(*args)
    c(*args)
    return c, [g for g in tessera.backend.compiled_graphs() if g.serial > since]


def summary_of(graph):
    (s,) = graph.summaries.values()
    return s


def assert_close(got, want, rel=1e-4):
    assert got.shape == want.shape and got.dtype == want.dtype
    if want.numel() == 0:
        return
    scale = want.abs().max().item()
    err = (got - want).abs().max().item()
    assert err <= rel * scale + 1e-5, f"max abs error {err:.3g} vs scale {scale:.3g}"


def storage(t):
    return t.untyped_storage().data_ptr()


# ---- the C++ Program from Python -----------------------------------------------------------

def build(outputs, inputs):
    return _C.compile(outputs, inputs)


def test_program_runs_a_chain_in_one_call_and_shares_dead_intermediates():
    te = tessera.te_ops
    shape = [64, 32]
    a = tessera.placeholder("a", shape)
    k_exp = build([te.exp(a)], [a])        # t1 = exp(x)
    k_neg = build([te.neg(a)], [a])        # t2 = -t1 ; t3 = -t2 ; y = -t3
    nbytes = 64 * 32 * 4
    buffers = [("input", 0, nbytes), ("temp", -1, nbytes), ("temp", -1, nbytes),
               ("temp", -1, nbytes), ("output", 0, nbytes)]
    prog = _C.Program(buffers, [(k_exp, [0, 1], []), (k_neg, [1, 2], []),
                                (k_neg, [2, 3], []), (k_neg, [3, 4], [])])
    # t1 is dead once t2 exists: t1 and t3 share a slot, so two slots hold three temps.
    assert prog.temp_bytes == 3 * nbytes
    assert prog.arena_bytes == 2 * nbytes
    assert prog.offset_of(1) == prog.offset_of(3) != prog.offset_of(2)
    x = torch.randn(shape)
    y = torch.empty(shape)
    for _ in range(2):  # the second call reuses the arena
        y.fill_(0)
        prog(x.data_ptr(), y.data_ptr())
        torch.testing.assert_close(y, -torch.exp(x))
    with pytest.raises(Exception, match="pointers"):
        prog(x.data_ptr())


def test_program_rejects_buffers_too_small_for_their_kernel():
    te = tessera.te_ops
    a = tessera.placeholder("a", [16])
    k = build([te.exp(a)], [a])
    with pytest.raises(Exception, match="needs 64"):
        _C.Program([("input", 0, 64), ("output", 0, 32)], [(k, [0, 1], [])])
    with pytest.raises(Exception, match="given twice"):
        _C.Program([("input", 0, 64), ("input", 0, 64), ("output", 0, 64)],
                   [(k, [0, 2], [])])


# ---- the backend's executor ------------------------------------------------------------------

def test_kernel_chain_runs_as_one_program_with_a_shared_arena():
    def f(x, w):
        for _ in range(4):  # four matmul+tanh kernels: the intermediates die in turn
            x = torch.tanh(x @ w)
        return x
    x, w = torch.randn(8, 16), torch.randn(16, 16) * 0.3
    c, graphs = compile_fn(f, x, w)
    s = summary_of(graphs[-1])
    assert s.kernels == 4
    (seg,) = s.segments
    assert len(seg.kernels) == 4 and seg.temps == 3
    assert seg.arena_bytes < seg.temp_bytes  # dead intermediates share memory
    assert "_C.Program" not in s.source and s.source.count(".data_ptr()") == 3  # x, w, out
    for _ in range(3):
        x = torch.randn(8, 16)
        assert_close(c(x, w), f(x, w))


def test_programs_can_be_switched_off(monkeypatch):
    def f(x):
        return torch.relu(x @ x.t()).sum(1)
    x = torch.randn(6, 5)
    monkeypatch.setattr(program_runner, "ENABLED", False)
    c, graphs = compile_fn(f, x)
    s = summary_of(graphs[-1])
    assert s.kernels >= 1 and not s.segments
    assert all(st.kind != "program" for st in s.steps)
    assert_close(c(x), f(x))


def test_a_program_that_cannot_be_built_leaves_kernels_to_python_calls(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("no program today")
    monkeypatch.setattr(program_runner._C, "Program", broken)

    def f(x, w):
        h = torch.tanh(x @ w)
        return torch.relu(h.t() @ x), h.reshape(-1)
    x, w = torch.randn(6, 6), torch.randn(6, 6)
    with caplog.at_level("WARNING", logger="tessera"):
        c, graphs = compile_fn(f, x, w)
    s = summary_of(graphs[-1])
    assert not s.segments and [st.kind for st in s.steps].count("kernel") == s.kernels == 2
    assert "no program today" in caplog.text
    for got, want in zip(c(x, w), f(x, w)):
        assert_close(got, want)


def test_mlp_inference_and_training_step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.GELU(),
                          nn.LayerNorm(32), nn.Linear(32, 4))
    x, wgt = torch.randn(8, 16), torch.randn(8, 4)
    ref = copy.deepcopy(model)
    (ref(x) * wgt).sum().backward()
    torch._dynamo.reset()
    since = tessera.backend.last_serial()
    c = torch.compile(lambda x: (model(x) * wgt).sum(), backend="tessera", options=KERNELS)
    for _ in range(2):  # the second step runs the compiled runners (the first records)
        model.zero_grad(set_to_none=True)
        c(x).backward()
    graphs = [g for g in tessera.backend.compiled_graphs() if g.serial > since]
    kinds = {g.kind for g in graphs}
    assert {"forward", "backward"} <= kinds
    assert all(summary_of(g).segments for g in graphs)  # both passes run C++ programs
    for p, q in zip(ref.parameters(), model.parameters()):
        assert_close(q.grad, p.grad, rel=1e-3)
    with torch.no_grad():
        model.eval()
        ci, _ = compile_fn(model, x)
        assert_close(ci(x), model(x))


def small_convnet():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.ReLU6(),
                        nn.Conv2d(8, 4, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    return net.eval()


@pytest.mark.parametrize("channels_last", [False, True])
def test_small_convnet(channels_last):
    net = small_convnet()
    x = torch.randn(2, 3, 10, 10)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    with torch.no_grad():
        c, graphs = compile_fn(net, x)
        s = summary_of(graphs[-1])
        assert s.segments and s.kernels >= 3
        assert_close(c(x), net(x), rel=1e-3)


def test_transformer_block_inference_and_training_step():
    torch.manual_seed(0)
    block = TransformerBlock()
    x, wgt = torch.randn(2, 6, 32), torch.randn(2, 6, 32)
    with torch.no_grad():
        c, graphs = compile_fn(block, x)
        s = summary_of(graphs[-1])
        # Reshapes between the kernels are absorbed and the weight transposes are read from
        # the weights themselves: the whole block is one C++ call.
        (seg,) = s.segments
        assert len(seg.kernels) == s.kernels >= 5
        assert seg.arena_bytes < seg.temp_bytes
        assert [st.kind for st in s.steps] == ["program"]
        assert_close(c(x), block(x), rel=1e-3)
    ref = copy.deepcopy(block)
    (ref(x) * wgt).sum().backward()
    torch._dynamo.reset()
    c = torch.compile(lambda x: (block(x) * wgt).sum(), backend="tessera", options=KERNELS)
    for _ in range(2):
        block.zero_grad(set_to_none=True)
        c(x).backward()
    for p, q in zip(ref.parameters(), block.parameters()):
        assert_close(q.grad, p.grad, rel=2e-3)


def test_views_of_a_run_value_are_made_only_where_read_outside():
    def f(x, w, w2):
        h = torch.tanh(x @ w)                 # kernel 1
        z = torch.relu(h.t() @ w2)            # kernel 2 reads h.t() in place
        return h.reshape(-1), z               # h.reshape is a graph output: it must exist
    x, w, w2 = torch.randn(6, 8), torch.randn(8, 5), torch.randn(6, 3)
    c, graphs = compile_fn(f, x, w, w2)
    s = summary_of(graphs[-1])
    (seg,) = s.segments
    assert len(seg.kernels) == 2
    assert [st.kind for st in s.steps] == ["program", "aten"]  # the view, after the call
    for got, want in zip(c(x, w, w2), f(x, w, w2)):
        assert_close(got, want)


def test_non_contiguous_and_zero_size_inputs():
    def f(x, w):
        return torch.tanh(x @ w) * 2 + 1
    w = torch.randn(8, 5)
    for x in [torch.randn(8, 6).t(),               # transposed: a permuted dense layout
              torch.randn(6, 16)[:, ::2],          # gaps: copied before the kernel reads it
              torch.randn(0, 8)]:                  # zero rows: ATen handles it
        c, _ = compile_fn(f, x, w)
        assert_close(c(x, w), f(x, w))
        x2 = x + 1  # same shape, new values: the runner, not the recording call
        assert_close(c(x2, w), f(x2, w))


def test_constant_kernel_inputs_are_read_in_place():
    def f(x):
        w = (torch.arange(64.).view(8, 8) * 0.01).exp()  # no inputs: computed at compile time
        return torch.relu(x @ w)
    x = torch.randn(4, 8)
    c, graphs = compile_fn(f, x)
    s = summary_of(graphs[-1])
    (seg,) = s.segments
    assert len(seg.inputs) == 2 and s.source.count(".data_ptr()") == 2  # x and the output
    assert_close(c(x), f(x))


def _fake_call(in_preps, out_specs):
    return types.SimpleNamespace(kernel=None, _in_preps=in_preps, _out_specs=out_specs,
                                 name="k")


def test_run_splits_where_a_consumer_cannot_read_the_producer_buffer():
    g = torch.fx.Graph()
    a, b, c = (g.placeholder(n) for n in "abc")
    nhwc = OutputSpec([2, 4, 4, 3], torch.float32, [0, 3, 1, 2], None)  # buffer order 0,2,3,1
    plain = OutputSpec([2, 3, 4, 4], torch.float32, None, None)
    s1 = Step("kernel", [b], [a], call=_fake_call([None], [nhwc]))
    same = InputPrep(None, [0, 2, 3, 1])
    s2 = Step("kernel", [c], [b], call=_fake_call([same], [plain]))
    assert [len(r.kernels()) for r in program_runner._runs([s1, s2], lambda n: None, {})] == [2]
    other = InputPrep(None, None)  # wants the logical (NCHW) order
    s2x = Step("kernel", [c], [b], call=_fake_call([other], [plain]))
    assert [len(r.kernels()) for r in program_runner._runs([s1, s2x], lambda n: None, {})] == [1, 1]
    sliced = InputPrep((slice(0, 1),) + (slice(None),) * 3, [0, 2, 3, 1])
    s2y = Step("kernel", [c], [b], call=_fake_call([sliced], [plain]))
    assert [len(r.kernels()) for r in program_runner._runs([s1, s2y], lambda n: None, {})] == [1, 1]


# ---- compiled graphs as custom operators -------------------------------------------------------

def mlp_graph():
    def f(x, w1, w2):
        return (torch.relu(x @ w1) @ w2).softmax(-1)
    args = (torch.randn(4, 8), torch.randn(8, 16), torch.randn(16, 8))
    c, graphs = compile_fn(f, *args)
    return f, args, graphs[-1]


def test_graph_op_matches_eager_and_passes_opcheck():
    f, args, g = mlp_graph()
    op = g.op
    assert str(op).startswith("tessera.graph_")
    out = op(*args)
    assert_close(out, f(*args))
    torch.library.opcheck(op, args)


def test_graph_op_exports_as_one_node_and_survives_enclosing_compile():
    f, args, g = mlp_graph()
    op = g.op

    class M(nn.Module):
        def forward(self, x, w1, w2):
            return op(x, w1, w2) * 3

    want = f(*args) * 3
    ep = torch.export.export(M(), args)
    calls = [n for n in ep.graph.nodes if n.op == "call_function" and n.target is op]
    assert len(calls) == 1
    assert not any("mm" in str(n.target) for n in ep.graph.nodes)  # opaque: not traced into
    x2 = torch.randn(4, 8)
    assert_close(ep.module()(x2, *args[1:]), f(x2, *args[1:]) * 3)
    for backend in ["eager", "inductor"]:
        torch._dynamo.reset()
        cm = torch.compile(M(), backend=backend)
        assert_close(cm(*args), want)
        assert_close(cm(x2, *args[1:]), f(x2, *args[1:]) * 3)
    # The GraphModule form of the graph exports too.
    ep2 = torch.export.export(g.as_module(), args)
    assert sum(1 for n in ep2.graph.nodes if n.target is op) == 1


def test_graph_op_outputs_never_alias_inputs_or_each_other():
    def f(x, y):
        z = x * y
        a, b = (z + 1).split(2)  # two views of one intermediate
        return x, x.t(), z, z.view(-1), a, b
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    c, graphs = compile_fn(f, x, y)
    g = graphs[-1]
    outs = g.op(x, y)
    assert g._graph_op().kernel.plan_calls == 1  # the C++ kernel's copies (graph_kernel.h)
    ptrs = [storage(t) for t in outs]
    assert len(set(ptrs)) == len(ptrs)
    assert storage(x) not in ptrs and storage(y) not in ptrs
    torch.library.opcheck(g.op, (x, y))
    full = g.call_op([x, y])
    eager = f(x, y)
    assert len(full) == len(g.gm.graph.find_nodes(op="output")[0].args[0])
    got = c(x, y)
    for a, b in zip(got, eager):
        assert_close(a, b)
    assert got[0] is x  # a returned input stays the caller's tensor


def test_graph_op_checks_signature_for_static_graphs():
    def f(x):
        return torch.tanh(x) * 2
    x = torch.randn(4, 8)
    c, graphs = compile_fn(f, x)
    g = graphs[-1]
    assert not g.dynamic
    for shape in [(4, 8), (3, 5), (4, 8)]:  # another shape gets its own runner
        x = torch.randn(shape)
        out = g.op(x)
        assert_close(out, f(x))
    assert len(g.summaries) == 2


def test_dynamic_graph_op_has_symint_inputs():
    def f(x):
        return torch.relu(x * 3).sum(0)
    x = torch.randn(5, 4)
    c, graphs = compile_fn(f, x, dynamic=True)
    g = graphs[-1]
    assert g.dynamic
    assert "SymInt" in g._graph_op().schema
    for n in [5, 7]:
        x = torch.randn(n, 4)
        placeholders = [p for p in g.gm.graph.nodes if p.op == "placeholder"]
        # A size placeholder per symbolic dim: dim 0 (traced as 5) is n, dim 1 stays 4.
        args = [x if isinstance(p.meta["val"], torch.Tensor)
                else (n if p.meta["val"].node.hint == 5 else 4) for p in placeholders]
        out = g.op(*args)
        assert_close(out, f(x))
        assert_close(c(x), f(x))
    op = g.op

    class M(nn.Module):
        def forward(self, x):
            return op(x.shape[0], x.shape[1], x) + 1
    n = torch.export.Dim("n")
    ep = torch.export.export(M(), (torch.randn(5, 4),), dynamic_shapes={"x": {0: n}})
    assert sum(1 for node in ep.graph.nodes if node.target is op) == 1
    x = torch.randn(9, 4)
    assert_close(ep.module()(x), f(x) + 1)


def test_graph_op_declares_mutated_inputs():
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x, y):
        x.add_(y)
        return torch.tanh(x) * 2
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    gm = make_fx(f)(x.clone(), y)
    g = graph_mod.CompiledGraph(gm, Options(anchor_measure=False), "inference")
    assert "(a0!)" in g._graph_op().schema
    xa = x.clone()
    out = g.op(xa, y)
    assert_close(xa, x + y)
    assert_close(out, torch.tanh(x + y) * 2)
    torch.library.opcheck(g.op, (x.clone(), y))


def test_backend_can_route_every_call_through_the_op(monkeypatch):
    monkeypatch.setattr(graph_mod, "CALL_VIA_OP", True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
    x = torch.randn(5, 8)
    ref = copy.deepcopy(model)
    ref(x).pow(2).sum().backward()
    calls = []
    real_call_op = graph_mod.CompiledGraph._call_op

    def spy(self, args):
        calls.append(self.kind)
        return real_call_op(self, args)
    monkeypatch.setattr(graph_mod.CompiledGraph, "_call_op", spy)
    torch._dynamo.reset()
    c = torch.compile(lambda x: model(x).pow(2).sum(), backend="tessera", options=KERNELS)
    for _ in range(2):
        model.zero_grad(set_to_none=True)
        c(x).backward()
    assert "forward" in calls and "backward" in calls
    for p, q in zip(ref.parameters(), model.parameters()):
        assert_close(q.grad, p.grad, rel=1e-3)
