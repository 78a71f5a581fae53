"""Runs of ATen steps executed from C++ (_C.AtenSequence, backend/aten_sequence.py): each
operator called through the dispatcher must give what it gives eagerly, and the runner must
hand whole runs to one call."""

import pytest
import torch

import tessera  # noqa: F401  (registers the backend)
from tessera import _C, backend
from tessera.backend import aten_sequence

KERNELS = {"anchor_measure": False}


def _compile(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="tessera", options=KERNELS)


def _source(since):
    (s,) = backend.recent_summaries(since)
    return s.source


def test_a_chain_of_operators_matches_eager():
    # slot 0: input; 1, 2: cumsums; 3: the mul with a scalar; defaults filled from the schema.
    seq = _C.AtenSequence(4, [0], [
        ("op", "aten::cumsum", "", [("slot", 0), ("const", 0)], {}, 1, [0]),
        ("op", "aten::cumsum", "", [("slot", 1), ("const", 0)], {"dtype": ("const", None)},
         2, [1]),
        ("op", "aten::mul", "Scalar", [("slot", 2), ("const", 0.5)], {}, 3, [2]),
    ], [3])
    assert len(seq) == 3
    x = torch.randn(9)
    (y,) = seq(x)
    torch.testing.assert_close(y, torch.cumsum(torch.cumsum(x, 0), 0) * 0.5)


def test_tuples_tensor_lists_and_optional_tensor_lists():
    # max.dim returns (values, indices): a tuple slot read by getitem; cat reads a Tensor[];
    # index reads a Tensor?[] with a None.
    seq = _C.AtenSequence(7, [0, 1], [
        ("op", "aten::max", "dim", [("slot", 0), ("const", 1)], {"keepdim": ("const", True)},
         2, []),
        ("getitem", 2, 0, 3, []),
        ("getitem", 2, 1, 4, [2]),
        ("op", "aten::cat", "", [("slots", [3, 0]), ("const", 1)], {}, 5, [3]),
        ("op", "aten::index", "Tensor", [("slot", 5), ("slots", [-1, 1])], {}, 6, [5]),
    ], [6, 4])
    x, idx = torch.randn(3, 5), torch.tensor([0, 2, 4])
    out, ind = seq(x, idx)
    values, indices = torch.max(x, 1, keepdim=True)
    torch.testing.assert_close(out, torch.cat([values, x], 1)[:, idx])
    assert torch.equal(ind, indices)


def test_getitem_of_a_list_return_counts_from_either_end():
    seq = _C.AtenSequence(4, [0], [
        ("op", "aten::split", "Tensor", [("slot", 0), ("const", 2)], {}, 1, [0]),
        ("getitem", 1, -1, 2, []),
        ("getitem", 1, 0, 3, [1]),
    ], [2, 3])
    x = torch.randn(5, 2)
    last, first = seq(x)
    assert torch.equal(last, x[4:]) and torch.equal(first, x[:2])
    bad = _C.AtenSequence(3, [0], [
        ("op", "aten::split", "Tensor", [("slot", 0), ("const", 2)], {}, 1, [0]),
        ("getitem", 1, 3, 2, [])], [2])
    with pytest.raises(RuntimeError, match="index 3 of 3"):
        bad(x)


def test_wrong_descriptions_are_refused():
    with pytest.raises(RuntimeError, match="no operator"):
        _C.AtenSequence(2, [0], [("op", "aten::no_such_op", "", [("slot", 0)], {}, 1, [])], [1])
    with pytest.raises(RuntimeError, match="no value for argument"):
        _C.AtenSequence(2, [0], [("op", "aten::cumsum", "", [("slot", 0)], {}, 1, [])], [1])
    with pytest.raises(RuntimeError, match="out of range"):
        _C.AtenSequence(2, [0], [("op", "aten::neg", "", [("slot", 5)], {}, 1, [])], [1])
    with pytest.raises(RuntimeError, match="not a tensor list"):
        _C.AtenSequence(2, [0], [("op", "aten::neg", "", [("slots", [0])], {}, 1, [])], [1])
    seq = _C.AtenSequence(2, [0], [("op", "aten::neg", "", [("slot", 0)], {}, 1, [])], [1])
    with pytest.raises(RuntimeError, match="1 expected"):
        seq(torch.ones(2), torch.ones(2))


def test_operator_errors_reach_python():
    seq = _C.AtenSequence(3, [0, 1], [("op", "aten::mm", "", [("slot", 0), ("slot", 1)], {},
                                       2, [])], [2])
    with pytest.raises(RuntimeError):
        seq(torch.randn(2, 3), torch.randn(4, 5))


def test_a_run_of_fallback_operators_is_one_call():
    def fn(x):
        for _ in range(6):
            x = torch.cumsum(x, 0)
        return x, torch.cummax(x, 0)[1]
    since = backend.last_serial()
    f = _compile(fn)
    x = torch.randn(16)
    f(x)
    got = f(x)
    want = fn(x)
    torch.testing.assert_close(got[0], want[0])
    assert torch.equal(got[1], want[1])
    src = _source(since)
    calls = [line for line in src.splitlines() if "aten.cumsum" in line]
    assert len(calls) == 1 and calls[0].count("aten.cumsum") == 6, src


def test_switched_off_every_operator_is_its_own_call(monkeypatch):
    monkeypatch.setattr(aten_sequence, "ENABLED", False)

    def fn(x):
        return torch.cumsum(torch.cumsum(x, 0), 0)
    since = backend.last_serial()
    f = _compile(fn)
    x = torch.randn(8)
    f(x)
    torch.testing.assert_close(f(x), fn(x))
    src = _source(since)
    assert "AtenSequence" not in src and src.count("= f") == 2, src


def test_kernels_and_operators_between_them_are_one_call():
    # cumsum (ATen), an elementwise kernel, two more ATen operators: one C++ call, and the
    # values between them never become Python locals.
    def fn(x):
        y = torch.cumsum(torch.cumsum(x, 0), 0)
        z = torch.tanh(y) * 2 + 1
        return torch.cumsum(torch.flip(z, [0]), 0)
    since = backend.last_serial()
    f = _compile(fn)
    x = torch.randn(32)
    f(x)
    torch.testing.assert_close(f(x), fn(x))
    src = _source(since)
    calls = [line for line in src.splitlines() if "# " in line]
    assert len(calls) == 1, src
    assert "aten.cumsum.default, aten.cumsum.default, tanh" in calls[0], src
    assert "data_ptr" not in src, src


def test_program_inputs_and_outputs_keep_their_layouts():
    # A transposed input (the kernel reads it permuted), a broadcast input (sliced), and
    # outputs eager gives transposed: all prepared by ATen steps inside the sequence.
    def fn(x, b):
        y = torch.cumsum(x, 1)
        z = torch.sigmoid(y.t() * b) + 1
        return z, torch.cumsum(z, 0).t()
    since = backend.last_serial()
    f = _compile(fn)
    x, b = torch.randn(5, 7), torch.randn(1, 5)
    f(x, b)
    got, want = f(x, b), fn(x, b)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
        assert g.shape == w.shape and g.stride() == w.stride()
    assert len([line for line in _source(since).splitlines() if "# " in line]) == 1


def test_prepacked_weights_are_passed_to_the_sequence_and_repacked_when_changed():
    torch.manual_seed(0)
    conv = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.Conv2d(32, 32, 3, padding=1)).eval()

    def fn(x):
        return torch.cumsum(conv(x), 1)
    x = torch.randn(2, 16, 12, 12)  # a side of no vector width's multiple: the rules pack
    with torch.no_grad():
        since = backend.last_serial()
        torch._dynamo.reset()
        f = torch.compile(fn, backend="tessera", options=dict(KERNELS, fallback=False))
        f(x)
        torch.testing.assert_close(f(x), fn(x), rtol=1e-4, atol=1e-4)
        src = _source(since)
        calls = [line for line in src.splitlines() if "# " in line]
        assert ".ptr(" in src, "no kernel reads a weight prepacked: nothing tested\n" + src
        packed = [line for line in src.splitlines() if ".ptr(" in line]
        assert len(calls) == 1 and len(packed) == 1 and "_in = [" in packed[0], src
        conv[2].weight.mul_(-0.5)  # in place: the packed copy must be made again
        torch.testing.assert_close(f(x), fn(x), rtol=1e-4, atol=1e-4)


def test_boxed_call_empties_its_list_and_keeps_no_input():
    import weakref
    seq = _C.AtenSequence(3, [0], [
        ("op", "aten::mul", "Scalar", [("slot", 0), ("const", 2.0)], {}, 1, [0]),
        ("op", "aten::neg", "", [("slot", 1)], {}, 2, [1]),
    ], [2])
    x = torch.randn(6)
    want = -(x * 2)
    gone = weakref.ref(x)
    args = [x]
    del x
    (y,) = seq.boxed(args)
    assert args == [] and gone() is None
    torch.testing.assert_close(y, want)
