"""A compiled graph's custom operator runs in C++ (_C.GraphKernel, graph_op.py): a call whose
input signature has a plan (its runner is one AtenSequence) never enters Python; any other call
goes to the Python kernel, which plans it. Every result is compared with eager."""

import gc
import itertools

import pytest
import torch

import tessera  # noqa: F401  (registers the backend)
from tessera import _C
from tessera.backend import compiled_graphs
from tessera.backend import graph as graph_mod

KERNELS = {"anchor_measure": False}
_names = itertools.count()


def _compiled_graph(fn, *args):
    torch._dynamo.reset()
    c = torch.compile(fn, backend="tessera", options=KERNELS)
    with torch.no_grad():
        c(*args)
    return c, compiled_graphs()[-1]


def _python_is_not_called(*args, **kwargs):
    raise AssertionError("a planned signature went through the Python kernel")


def test_planned_signatures_run_without_python_and_others_are_planned(monkeypatch):
    def f(x, y):
        return (torch.cumsum(x, 0) * y).sin() + 1, x.t()
    x, y = torch.randn(8, 8), torch.randn(8, 8)
    _, g = _compiled_graph(f, x, y)
    op = g.op
    kernel = g._graph_op().kernel
    assert kernel.num_plans == 1  # the runner made by the first call is one sequence

    monkeypatch.setattr(g, "run_checked", _python_is_not_called)
    for got, want in zip(op(x, y), f(x, y)):
        torch.testing.assert_close(got, want)
    assert (kernel.plan_calls, kernel.fallback_calls) == (1, 0)

    # Another shape, and the same shape with other strides, are other signatures: each goes
    # through Python once and is then planned.
    monkeypatch.undo()
    xt = torch.randn(8, 8).t()
    for args in [(torch.randn(4, 8), torch.randn(4, 8)), (xt, y)]:
        for _ in range(2):
            for got, want in zip(op(*args), f(*args)):
                torch.testing.assert_close(got, want)
    assert (kernel.plan_calls, kernel.fallback_calls, kernel.num_plans) == (3, 2, 3)


def test_a_graph_of_one_program_runs_without_python_too(monkeypatch):
    # Fully fused: the Python runner calls the program directly (no ATen operator to share a
    # sequence with); the C++ kernel still gets the graph as one sequence.
    def f(x, y):
        return torch.relu(x * 2 + y).sum(-1)
    x, y = torch.randn(16, 32), torch.randn(16, 32)
    _, g = _compiled_graph(f, x, y)
    (_, runner), = g._runners.items()
    assert "_in = [" not in runner.source and runner.whole_sequence is not None
    op = g.op
    monkeypatch.setattr(g, "run_checked", _python_is_not_called)
    torch.testing.assert_close(op(x, y), f(x, y))
    assert g._graph_op().kernel.plan_calls == 1


def test_prepacked_weights_run_in_cpp_until_a_weight_changes(monkeypatch):
    monkeypatch.setattr(graph_mod, "CALL_VIA_OP", True)  # the module's calls go through the op
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(1600, 10)).eval()
    x = torch.randn(1, 8, 10, 10)
    torch._dynamo.reset()
    c = torch.compile(model, backend="tessera", options=KERNELS)
    with torch.no_grad():
        # The first call plans (through the Python kernel, eagerly); the second still goes to
        # Python, whose runner makes the packed copy; from then on C++ runs the plan.
        for _ in range(2):
            torch.testing.assert_close(c(x), model(x))
        g = compiled_graphs()[-1]
        kernel = g._graph_op().kernel
        (_, runner), = g._runners.items()
        assert runner.whole_sequence.packed  # the convolution reads its weight packed
        g.run_checked = _python_is_not_called
        torch.testing.assert_close(c(x), model(x))
        assert (kernel.plan_calls, kernel.fallback_calls) == (1, 2)
        del g.run_checked
        model[0].weight.mul_(-1)  # changed in place: its packed copy is stale
        torch.testing.assert_close(c(x), model(x))  # Python packs it again
        assert (kernel.plan_calls, kernel.fallback_calls) == (1, 3)
        torch.testing.assert_close(c(x), model(x))  # and C++ reads the new copy
        assert (kernel.plan_calls, kernel.fallback_calls) == (2, 3)


def test_a_packed_weight_is_current_only_for_its_tensor_as_it_was():
    w, packed = torch.randn(4, 4), torch.randn(16)
    shared = _C.PackedWeight()
    assert shared.current(w) is None  # nothing packed yet
    shared.set(packed, w, w._version)
    assert shared.current(w) == packed.data_ptr()
    assert shared.current(w.clone()) is None  # another tensor
    w.add_(1)
    assert shared.current(w) is None  # changed in place
    with torch.inference_mode():
        v = torch.randn(4, 4)
    shared.set(packed, v, None)
    assert shared.current(v) is None  # no version counter: never current


# ---- _C.GraphKernel on a hand-made operator -----------------------------------------------------

@pytest.fixture
def scaled_op():
    """An operator tessera::<name>(Tensor x, int n) -> Tensor whose C++ kernel has no plan yet,
    with a Python kernel that records its calls."""
    name = f"test_scaled_{next(_names)}"
    lib = torch.library.Library("tessera", "FRAGMENT")
    lib.define(f"{name}(Tensor x, int n) -> Tensor")
    calls = []

    def python_kernel(x, n):
        calls.append(n)
        return x * n

    kernel = _C.GraphKernel(f"tessera::{name}", 2, 1, python_kernel)
    op = getattr(torch.ops.tessera, name).default
    yield op, kernel, calls
    kernel.close()
    del lib


def _times_n_sequence():
    # slot 0: x, slot 1: n, slot 2: x * n
    return _C.AtenSequence(3, [0, 1], [
        ("op", "aten::mul", "Scalar", [("slot", 0), ("slot", 1)], {}, 2, [0]),
    ], [2])


def test_a_plan_applies_only_to_its_exact_signature(scaled_op):
    op, kernel, calls = scaled_op
    x = torch.randn(3, 4)
    kernel.add_plan([torch.empty(3, 4, device="meta"), 2], _times_n_sequence(), [0, 1], [0],
                    [False])
    torch.testing.assert_close(op(x, 2), x * 2)
    assert calls == [] and kernel.plan_calls == 1
    # Another scalar value, dtype, shape or stride: the Python kernel.
    for args in [(x, 3), (x.double(), 2), (torch.randn(4, 3), 2), (torch.randn(4, 3).t(), 2)]:
        torch.testing.assert_close(op(*args), args[0] * args[1])
    assert calls == [3, 2, 2, 2] and kernel.plan_calls == 1


def test_a_cloned_return_is_a_copy(scaled_op):
    op, kernel, _ = scaled_op
    # A plan returning its input itself (alias), with the clone flag set.
    seq = _C.AtenSequence(2, [0], [("alias", 0, 1, [])], [1])
    kernel.add_plan([torch.empty(5, device="meta"), 1], seq, [0], [0], [True])
    x = torch.randn(5)
    out = op(x, 1)
    assert torch.equal(out, x) and out.data_ptr() != x.data_ptr()


def test_python_kernel_errors_and_wrong_returns_reach_the_caller(scaled_op):
    op, kernel, calls = scaled_op
    with pytest.raises(RuntimeError, match="Expected"):
        op(torch.randn(2), "not an int")  # refused by the schema before the kernel
    name = str(op).split(".")[1]
    lib = torch.library.Library("tessera", "FRAGMENT")
    lib.define(f"{name}_bad(Tensor x) -> Tensor")
    bad = _C.GraphKernel(f"tessera::{name}_bad", 1, 1, lambda x: 3)
    with pytest.raises(RuntimeError, match="schema declares a Tensor"):
        getattr(torch.ops.tessera, f"{name}_bad").default(torch.randn(2))
    bad.close()

    def raising(x, n):
        raise ValueError("from the Python kernel")
    lib.define(f"{name}_raise(Tensor x, int n) -> Tensor")
    raises = _C.GraphKernel(f"tessera::{name}_raise", 2, 1, raising)
    with pytest.raises(ValueError, match="from the Python kernel"):
        getattr(torch.ops.tessera, f"{name}_raise").default(torch.randn(2), 1)
    raises.close()


def test_plans_are_checked_against_the_operator(scaled_op):
    _, kernel, _ = scaled_op
    meta = torch.empty(3, device="meta")
    with pytest.raises(RuntimeError, match="signature has 1 arguments"):
        kernel.add_plan([meta], _times_n_sequence(), [0, 1], [0], [False])
    with pytest.raises(RuntimeError, match="gives 2 returns"):
        kernel.add_plan([meta, 1], _times_n_sequence(), [0, 1], [0, 0], [False, False])
    with pytest.raises(RuntimeError, match="reads argument 2"):
        kernel.add_plan([meta, 1], _times_n_sequence(), [0, 2], [0], [False])


def test_freeing_the_graph_deregisters_its_kernel():
    def f(x):
        return torch.cumsum(x, 0) * 2
    x = torch.randn(6)
    c, g = _compiled_graph(f, x)
    op = g.op
    torch.testing.assert_close(op(x), f(x))
    name = op._schema.name
    del g, c
    torch._dynamo.reset()
    gc.collect()
    with pytest.raises(Exception):
        torch._C._dispatch_find_schema_or_throw(name, "")
