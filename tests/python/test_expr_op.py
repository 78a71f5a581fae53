"""tessera.op: custom operators from expressions, checked against torch."""

import re

import pytest
import torch
import torch.nn.functional as F

import tessera
from tessera import expr_op
from tessera.expr_op import ExpressionError, op


def close(got, want, tol=1e-4):
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def test_exported_from_package():
    assert tessera.op is op


# ---- values vs torch ----------------------------------------------------------------------

def test_gemm_and_gemm_relu():
    a, b = torch.randn(33, 20), torch.randn(20, 17)
    gemm = op("C[i, j] = sum(k) A[i, k] * B[k, j]")
    close(gemm(a, b), a @ b)
    gemm_relu = op("C[i, j] = relu(sum(k) A[i, k] * B[k, j])")
    close(gemm_relu(a, b), torch.relu(a @ b))
    # The reduction and its relu run as one stage (epilogue), whatever the shapes.
    assert "C_sum" in str(gemm_relu.kernel(a, b).schedule)


def test_gemm_with_bias_and_transposes():
    a, b, bias = torch.randn(9, 12), torch.randn(12, 7), torch.randn(7)
    dense = op("C[i, j] = sum(k) A[i, k] * B[k, j] + bias[j]")
    close(dense(a, b, bias), a @ b + bias)
    at_bt = op("C[i, j] = sum(k) A[k, i] * B[j, k]")
    close(at_bt(a.t().contiguous(), b.t().contiguous()), a @ b)
    # Non-contiguous views are accepted (copied to contiguous by the kernel wrapper).
    close(at_bt(a.t(), b.t()), a.t().t() @ b)
    transpose = op("Y[j, i] = X[i, j]")
    close(transpose(a), a.t())


def test_batched_matmul_and_broadcasting():
    a, b = torch.randn(3, 5, 8), torch.randn(3, 8, 4)
    bmm = op("C[n, i, j] = sum(k) A[n, i, k] * B[n, k, j]")
    close(bmm(a, b), torch.bmm(a, b))
    x, u, v = torch.randn(6, 5), torch.randn(5), torch.randn(6)
    outer = op("Y[i, j] = X[i, j] + u[j] * v[i]")
    close(outer(x, u, v), x + u[None, :] * v[:, None])


def test_softmax_in_statements():
    softmax = op("""
        M[i] = max(j) X[i, j]      # row max
        E[i, j] = exp(X[i, j] - M[i])
        Y[i, j] = E[i, j] / sum(k) E[i, k]
    """)
    x = torch.randn(7, 50)
    close(softmax(x), torch.softmax(x, dim=-1), tol=1e-5)
    two = op("T[i] = max(j) X[i, j]; Y[i, j] = exp(X[i, j] - T[i])")
    close(two(x), torch.exp(x - x.max(dim=1, keepdim=True).values), tol=1e-5)
    assert softmax.inputs == ("X",)
    assert softmax.intermediates == ("M", "E")


def test_conv_by_index_arithmetic():
    conv = op("O[n, y, x] = sum(c, r, s) I[n, c, y + r, x + s] * W[c, r, s]")
    inp, w = torch.randn(2, 3, 10, 9), torch.randn(3, 3, 2)
    close(conv(inp, w), F.conv2d(inp, w[None]).squeeze(1))
    strided = op("O[y] = sum(r) I[2 * y + r] * W[r]")
    i1, w1 = torch.randn(11), torch.randn(3)
    close(strided(i1, w1), F.conv1d(i1[None, None], w1[None, None], stride=2).flatten())


def test_layer_norm_like():
    ln = op("""
        mean[i] = sum(j) X[i, j] / 64
        var[i] = sum(j) (X[i, j] - mean[i]) * (X[i, j] - mean[i]) / 64
        Y[i, j] = (X[i, j] - mean[i]) * rsqrt(var[i] + 1e-5) * g[j] + b[j]
    """)
    x, g, b = torch.randn(5, 64), torch.randn(64), torch.randn(64)
    close(ln(x, g, b), F.layer_norm(x, (64,), g, b, eps=1e-5), tol=1e-4)


def test_functions_where_and_iterators():
    f = op("Y[i, j] = where(X[i, j] > 0.5 and j % 2 == 0, gelu(X[i, j]), "
           "sigmoid(X[i, j]) * tanh(X[i, j]) + pow(abs(X[i, j]), 1.5) - i / 4)")
    x = torch.randn(5, 8)
    i = torch.arange(5, dtype=torch.float32)[:, None].expand(5, 8)
    j = torch.arange(8)[None, :].expand(5, 8)
    want = torch.where((x > 0.5) & (j % 2 == 0), F.gelu(x),
                       torch.sigmoid(x) * torch.tanh(x) + x.abs().pow(1.5) - i / 4)
    close(f(x), want)
    shift = op("Y[i] = where(i > 0, X[max(i - 1, 0)], 0.0)", shapes={"i": 6})
    x1 = torch.randn(6)
    close(shift(x1), torch.cat([torch.zeros(1), x1[:-1]]))


def test_reads_guarded_by_where_may_leave_their_tensor():
    # Zero padding written as EinNet writes it: the reads outside X happen only where the
    # guard is false, so they are never made (a clamp would turn them into gathers).
    same = op("Y[i, j] = sum(k) where(i + k - 2 >= 0 and i + k - 2 < 40, "
              "X[i + k - 2, j], 0.0) * W[k]", shapes={"i": 40, "k": 5})
    x, w = torch.randn(40, 37), torch.randn(5)
    want = F.conv1d(x.t().reshape(37, 1, 40), w.reshape(1, 1, 5), padding=2).reshape(37, 40).t()
    close(same(x, w), want.contiguous())
    # A dilated band (Longformer's G2BMM with B given [b, k, n]): zero outside B's rows.
    g2bmm = op("O[b, m, w] = sum(k) where(m + 2 * w - 6 >= 0 and m + 2 * w - 6 < 50, "
               "A[b, m, k] * B[b, k, m + 2 * w - 6], 0.0)", shapes={"w": 7})
    a, b = torch.randn(2, 50, 24), torch.randn(2, 24, 50)
    padded = F.pad(b, (6, 6))
    want = torch.stack([(a * padded[:, :, 2 * w: 2 * w + 50].transpose(1, 2)).sum(-1)
                        for w in range(7)], -1)
    close(g2bmm(a, b), want)
    # Each end the index can pass needs its own bound in the condition.
    with pytest.raises(ExpressionError, match="keeps this index in"):
        op("Y[i] = where(i + 1 >= 0, X[i + 1], 0.0)", shapes={"i": 8})(torch.randn(8))


def test_dtypes():
    x64 = torch.randn(4, 6, dtype=torch.float64)
    rowsum = op("S[i] = sum(j) X[i, j]")
    close(rowsum(x64), x64.sum(1))
    xi = torch.randint(-20, 20, (10,), dtype=torch.int64)
    idiv = op("Y[i] = X[i] // 3 + X[i] % 3")
    close(idiv(xi), xi // 3 + xi % 3)
    xi32 = xi.to(torch.int32)
    half = op("Y[i] = X[i] / 2")
    close(half(xi32), xi32 / 2)
    with pytest.raises(TypeError, match="float16"):
        rowsum(torch.randn(2, 3, dtype=torch.float16))


def test_keyword_arguments_and_binding_errors():
    sub = op("C[i] = A[i] - B[i]")
    a, b = torch.randn(5), torch.randn(5)
    close(sub(B=b, A=a), a - b)
    close(sub(a, B=b), a - b)
    with pytest.raises(TypeError, match="missing input"):
        sub(a)
    with pytest.raises(TypeError, match="no input 'Z'"):
        sub(a, b, Z=b)
    with pytest.raises(TypeError, match="twice"):
        sub(a, A=a)
    with pytest.raises(TypeError, match="takes 2 inputs"):
        sub(a, b, b)


def test_kernels_cached_per_shapes():
    f = op("Y[i, j] = X[i, j] * 3")
    k1 = f.kernel(torch.randn(4, 5))
    assert f.kernel(torch.randn(4, 5)) is k1
    assert f.kernel(torch.randn(5, 4)) is not k1


# ---- errors -------------------------------------------------------------------------------

def caret_column(message: str) -> int:
    """1-based column of the caret in the last line of an error message."""
    last = message.rstrip("\n").split("\n")[-1]
    return len(last) - len(last.lstrip()) - 2 + 1  # the excerpt is indented by two spaces


@pytest.mark.parametrize("source,column,needle", [
    ("C[i, j] = sum(k) A[i, k] * B[k, j] +", 37, "expected an operand"),
    ("C[i] = foo(A[i])", 8, "unknown function 'foo'"),
    ("C[i] = A[k]", 10, "iterator k is not bound"),
    ("C[i] = A[i] $ B[i]", 13, "unexpected character"),
    ("C[i] = A[B[i]]", 10, "data-dependent"),
    ("C[i, j] = A[i]", 6, "appears only in the output"),
    ("C[i] = sum(i) A[i]", 12, "already bound"),
])
def test_syntax_errors_point_at_the_column(source, column, needle):
    with pytest.raises(ValueError) as info:
        op(source)
    err = info.value
    assert isinstance(err, ExpressionError)
    msg = str(err)
    assert needle in msg
    assert msg.startswith(f"expression error at column {column}:")
    assert err.column == column and err.line == 1
    lines = msg.split("\n")
    assert lines[1] == "  " + source
    assert caret_column(msg) == column and lines[2].strip() == "^"


def test_multi_line_error_names_the_line():
    with pytest.raises(ValueError, match=r"at line 3, column 15: iterator q is not bound") as info:
        op("T[i] = max(j) X[i, j]\n"
           "U[i] = T[i] * 2\n"
           "Y[i] = U[i] + q")
    assert info.value.line == 3
    assert str(info.value).endswith("\n  Y[i] = U[i] + q\n  " + " " * 14 + "^")


def test_shape_errors_at_call_time():
    gemm = op("C[i, j] = sum(k) A[i, k] * B[k, j]")
    with pytest.raises(ValueError) as info:
        gemm(torch.randn(4, 5), torch.randn(6, 3))
    assert info.value.column == 30
    assert "iterator k has extent 6 here (dim 0 of B" in str(info.value)
    with pytest.raises(ValueError, match="read with 2 indices but the given tensor has 3 dims"):
        gemm(torch.randn(4, 5, 1), torch.randn(5, 3))
    shifted = op("C[i] = A[i] + A[i + 1]")
    with pytest.raises(ValueError, match=re.escape("ranges over [1, 5] but dim 0 of A has size 5")):
        shifted(torch.randn(5))
    # A read before the tensor's start is an error too (it once read 0.0), naming the way to ask
    # for zero padding; the guarded form gives it.
    with pytest.raises(ValueError, match=re.escape("ranges over [-1, 4] but dim 0 of A has "
                                                   "size 5") + ".*where"):
        op("C[i] = A[i - 1]")(torch.randn(5))
    a = torch.randn(5)
    shifted_right = op("C[i] = where(i > 0, A[i - 1], 0.0)", shapes={"i": 5})
    close(shifted_right(a), torch.cat([torch.zeros(1), a[:-1]]))


def test_shapes_argument():
    bcast = op("Y[i, j] = X[i] + j", shapes={"j": 3})
    x = torch.randn(4)
    close(bcast(x), x[:, None] + torch.arange(3, dtype=torch.float32)[None, :])
    tiled = op("Y[i, j] = X[i // 2, j % 3]", shapes={"Y": [6, 6]})
    x2 = torch.randn(3, 3)
    close(tiled(x2), x2.repeat_interleave(2, 0).repeat(1, 2))
    with pytest.raises(ValueError, match="shapes: q is not an iterator"):
        op("Y[i] = X[i]", shapes={"q": 2})
    with pytest.raises(TypeError):
        op("Y[i] = X[i]", shapes={"i": "2"})


# ---- registration, torch.compile, opcheck -------------------------------------------------

def test_registered_as_torch_op():
    gemm_relu = op("C[i, j] = relu(sum(k) A[i, k] * B[k, j])")
    assert re.fullmatch(r"C_[0-9a-f]{8}", gemm_relu.name)
    packet = getattr(torch.ops.tessera, gemm_relu.name)
    a, b = torch.randn(6, 4), torch.randn(4, 5)
    close(packet(a, b), torch.relu(a @ b))
    close(packet.default(a, b), torch.relu(a @ b))
    # The same definition again shares the registration; a name clash is an error.
    again = op("C[i, j] = relu(sum(k) A[i, k] * B[k, j])")
    assert again.name == gemm_relu.name and again.torch_op is gemm_relu.torch_op
    named = op("Y[i] = X[i] * 2", name="expr_test_double")
    close(torch.ops.tessera.expr_test_double(torch.ones(3)), torch.full((3,), 2.0))
    assert op("Y[i] = X[i] * 2", name="expr_test_double").torch_op is named.torch_op
    with pytest.raises(ValueError, match="already defined by a different expression"):
        op("Y[i] = X[i] * 3", name="expr_test_double")
    with pytest.raises(ValueError, match="valid identifier"):
        op("Y[i] = X[i] * 3", name="not valid")


def test_fake_kernel_shapes_and_dtypes():
    conv = op("O[n, y, x] = sum(c, r, s) I[n, c, y + r, x + s] * W[c, r, s]")
    inp = torch.empty(2, 3, 10, 9, device="meta")
    w = torch.empty(3, 3, 2, device="meta")
    out = conv.torch_op(inp, w)
    assert out.shape == (2, 8, 8) and out.device.type == "meta" and out.dtype == torch.float32
    half = op("Y[i] = X[i] / 2")
    assert half.torch_op(torch.empty(4, dtype=torch.int32, device="meta")).dtype == torch.float32


def test_torch_compile_fullgraph():
    gemm_relu = op("C[i, j] = relu(sum(k) A[i, k] * B[k, j])")

    def f(a, b):
        return gemm_relu(a, b) * 2 + 1

    compiled = torch.compile(f, fullgraph=True)
    a, b = torch.randn(16, 8), torch.randn(8, 12)
    close(compiled(a, b), f(a, b))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_dynamic_shapes(backend):
    torch._dynamo.reset()
    conv = op("O[n, y, x] = sum(c, r, s) I[n, c, y + r, x + s] * W[c, r, s]")

    def f(inp, w):
        return conv(inp, w).relu()

    compiled = torch.compile(f, fullgraph=True, dynamic=True, backend=backend)
    for shape in [(2, 3, 10, 9), (1, 3, 7, 12)]:
        inp, w = torch.randn(*shape), torch.randn(3, 3, 2)
        close(compiled(inp, w), F.conv2d(inp, w[None]).squeeze(1).relu())


@pytest.mark.parametrize("source,make_args", [
    ("C[i, j] = relu(sum(k) A[i, k] * B[k, j])", lambda: (torch.randn(6, 4), torch.randn(4, 5))),
    ("O[n, y, x] = sum(c, r, s) I[n, c, y + r, x + s] * W[c, r, s]",
     lambda: (torch.randn(2, 3, 8, 7), torch.randn(3, 3, 2))),
    ("M[i] = max(j) X[i, j]; Y[i, j] = exp(X[i, j] - M[i])", lambda: (torch.randn(5, 9),)),
    ("Y[i] = X[i] // 3 + X[i] % 3", lambda: (torch.randint(-9, 9, (7,)),)),
])
def test_opcheck(source, make_args):
    f = op(source)
    torch.library.opcheck(f.torch_op, make_args())


def test_module_exports():
    assert expr_op.ExpressionError is tessera._C.ExpressionError
    assert issubclass(ExpressionError, ValueError)


def test_derive_true_sees_through_guards_that_keep_reads_in_bounds():
    # G2BMM as a user writes it: the band's rows guarded by where(...). The guard is EinNet's
    # implicit padding, so the dilated band is derived (regrouped by residue) like the paper's.
    n, w, d = 64, 3, 2
    row = f"m + {d} * w - {d * w}"
    g2bmm = tessera.op(f"O[b, m, w] = sum(k) where({row} >= 0 and {row} < {n}, "
                       f"A[b, m, k] * B[b, k, {row}], 0.0)", shapes={"w": 2 * w + 1}, derive=True)
    a, b = torch.randn(2, n, 8), torch.randn(2, 8, n)
    rows = torch.arange(n)[:, None] + d * (torch.arange(2 * w + 1)[None, :] - w)
    inside = (rows >= 0) & (rows < n)
    want = torch.einsum("bmk,bkmw->bmw", a, b[:, :, rows.clamp(0, n - 1)]) * inside
    torch.testing.assert_close(g2bmm(a, b), want, rtol=1e-4, atol=1e-4)
    (report,) = g2bmm.derivations.values()
    assert report["derivations"] > 0  # none while the guard hid the product from the rules
    if report["found"]:  # only when measured faster than the expression's own kernel
        assert report["rules"] and report["derived_ms"] < report["original_ms"]


def test_derive_true_keeps_the_expressions_values():
    conv = tessera.op("O[n, f, y, x] = sum(c, r, s) I[n, c, y + r, x + s] * W[f, c, r, s]",
                      derive=True)
    i, w = torch.randn(1, 8, 10, 10), torch.randn(8, 8, 3, 3)
    torch.testing.assert_close(conv(i, w), F.conv2d(i, w), rtol=1e-4, atol=1e-4)
    (report,) = conv.derivations.values()
    assert report["states"] > 0
    if report["found"]:  # only when measured faster than the expression's own kernel
        assert report["rules"] and report["derived_ms"] < report["original_ms"]



def test_a_band_product_takes_the_skewed_register_tile_and_keeps_its_values():
    # The dilation-1 band EinNet's G2BMM derivation ends with: the rules compute 8 rows over one
    # window (schedule/skewed_tiling.h), so each band vector loaded feeds every row.
    import json
    rows, band, k = 45, 33, 24
    band_op = op("O[b, q, w] = sum(k) A[b, q, k] * L[b, k, q + w]", shapes={"w": band},
                 tune="default")
    a, l = torch.randn(2, rows, k), torch.randn(2, k, rows + band - 1)
    windows = l.unfold(2, band, 1)  # [b, k, q, w] = L[b, k, q + w]
    close(band_op(a, l), torch.einsum("bqk,bkqw->bqw", a, windows))
    (stage,) = json.loads(str(band_op.kernel(a, l).schedule))["stages"]
    assert stage["skew_axis"] == 1 and stage["vector_axis"] == 2
