"""tessera.op(..., dynamic=): one DietCode-tuned kernel serves every size of a declared range."""

import pytest
import torch

from tessera import _C
from tessera.expr_op import ExpressionError, op

GEMM = "C[i, j] = sum(k) A[i, k] * B[k, j]"


def jit_compiles() -> int:
    return int(_C.compile_counters()["jit_compiles"])


def close(got, want):
    assert got.shape == want.shape, (got.shape, want.shape)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_one_kernel_serves_every_size_in_the_range():
    gemm = op(GEMM, name="dyn_gemm_range", dynamic={"i": (1, 40)}, records=False)
    b = torch.randn(24, 20)
    first = torch.randn(37, 24)
    close(gemm(first, b), first @ b)  # tunes and compiles the one kernel
    call = gemm.dynamic_kernel(first, b)
    assert call.dietcode, "DietCode's micro-kernels and dispatcher, not the rules' kernel alone"
    before = jit_compiles()
    # Sizes that are not tile multiples, smaller than a tile, a tile, the range's ends.
    for rows in (1, 2, 3, 7, 8, 9, 13, 16, 17, 31, 40):
        a = torch.randn(rows, 24)
        close(gemm(a, b), a @ b)
        assert gemm.dynamic_kernel(a, b) is call
    assert jit_compiles() == before, "no compile per size"


def test_size_named_as_an_input_dim_and_the_fake_kernel():
    gemm = op(GEMM, name="dyn_gemm_dim", dynamic={"A.size(0)": (1, 16)}, records=False)
    b = torch.randn(8, 12)
    for rows in (1, 5, 16):
        a = torch.randn(rows, 8)
        close(gemm(a, b), a @ b)
    compiled = torch.compile(lambda a, b: gemm(a, b) + 1, fullgraph=True, dynamic=True)
    a = torch.randn(11, 8)
    close(compiled(a, b), a @ b + 1)


def test_outside_the_range_a_kernel_for_those_shapes_runs():
    gemm = op(GEMM, name="dyn_gemm_out", dynamic={"i": (2, 8)}, records=False)
    b = torch.randn(6, 5)
    inside = torch.randn(3, 6)
    close(gemm(inside, b), inside @ b)
    for rows in (1, 9, 30):
        a = torch.randn(rows, 6)
        assert gemm.dynamic_kernel(a, b) is None
        close(gemm(a, b), a @ b)


def test_other_static_dims_get_their_own_kernel():
    gemm = op(GEMM, name="dyn_gemm_sig", dynamic={"i": (1, 8)}, records=False)
    a = torch.randn(5, 4)
    b1, b2 = torch.randn(4, 3), torch.randn(4, 6)
    close(gemm(a, b1), a @ b1)
    close(gemm(a, b2), a @ b2)
    assert gemm.dynamic_kernel(a, b1) is not gemm.dynamic_kernel(a, b2)


def test_mistakes_are_clear_errors():
    with pytest.raises(ExpressionError, match="dynamic= names 'n'"):
        op(GEMM, dynamic={"n": (1, 8)})
    with pytest.raises(ExpressionError, match="Z is not an input"):
        op(GEMM, dynamic={"Z.size(0)": (1, 8)})
    with pytest.raises(ExpressionError, match="has 2 dims"):
        op(GEMM, dynamic={"A.size(2)": (1, 8)})
    with pytest.raises(ValueError, match="not a range"):
        op(GEMM, dynamic={"i": (9, 8)})
    with pytest.raises(TypeError, match="pair of ints"):
        op(GEMM, dynamic={"i": 8})
    with pytest.raises(ValueError, match="both give the extent"):
        op("C[i] = A[i] * 2.0", shapes={"i": 4}, dynamic={"i": (1, 8)})
    with pytest.raises(ValueError, match="same input dim"):
        op(GEMM, dynamic={"i": (1, 8), "A.size(0)": (1, 8)})
    add = op("C[i] = A[i] + B[i]", name="dyn_add_disagree", dynamic={"i": (1, 8)})
    with pytest.raises(ValueError, match="different values"):
        add(torch.randn(3), torch.randn(4))


def test_given_candidates_are_tried_beside_construct_modes():
    """_C.dynamic.tune(candidates=...): a schedule from elsewhere (here the rules' schedule of
    one size) is built, verified and timed with the others, and reported as "given"."""
    import json

    import tessera

    def dense(rows):
        x = tessera.placeholder("X", [rows, 32])
        w = tessera.placeholder("W", [48, 32])
        return tessera.te_ops.dense(x, w), x, w

    y8, x8, w8 = dense(8)
    given = tessera.Kernel([y8], [x8, w8], name="given_dense_8").report.schedule
    y, x, w = dense(tessera.size_var("S", 1, 24))
    dyn = _C.dynamic.tune([y], [x, w], name="given_dense", candidates=[given])
    reports = json.loads(dyn.report)["candidate_reports"]
    ours = [r for r in reports if r["origin"] == "given"]
    assert len(ours) == 1 and ours[0]["ok"], ours
    main = lambda s: s["stages"][-1]  # noqa: E731
    assert main(ours[0]["schedule"])["tile_outer"] == main(json.loads(given.dump()))["tile_outer"]
    a, b = torch.randn(13, 32), torch.randn(48, 32)
    out = torch.empty(13, 48)
    dyn.run([a.data_ptr(), b.data_ptr(), out.data_ptr()], [13])
    close(out, a @ b.T)
