"""EinNet derivations in the torch.compile backend (options derive=True, derived_anchor.py).

A convolution partition is offered its derived program as one more measured candidate. Whether
a derivation wins depends on timing, so the plumbing is tested with the candidate forced: the
derived kernel (bias included) and the partition's other operators must give eager's values.
"""

import torch
import torch.nn as nn

from tessera.backend import derived_anchor
from tessera.backend.options import parse_options

import pytest


def _model(bias: bool):
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(8, 16, 3, padding=1, bias=bias), nn.ReLU(),
                         nn.Conv2d(16, 16, 3, padding=1, bias=bias)).eval()


@pytest.mark.parametrize("bias", [False, True])
def test_forced_derived_candidate_matches_eager(bias, monkeypatch):
    real = derived_anchor._derive

    def always_found(sig, tune):  # the derived program, or the original in EinNet form
        report = dict(real(sig, "default"))
        report["found"] = True
        return report
    monkeypatch.setattr(derived_anchor, "_derive", always_found)
    monkeypatch.setenv("TESSERA_FORCE_CHOICE", "derived")
    derived_anchor.clear()
    torch._dynamo.reset()
    m = _model(bias)
    x = torch.randn(2, 8, 12, 12)
    with torch.no_grad():
        f = torch.compile(m, backend="tessera",
                          options={"derive": True, "records_db": False, "fallback": False,
                                   "tune": "default"})
        f(x)
        torch.testing.assert_close(f(x), m(x), rtol=1e-4, atol=1e-4)
    import tessera
    impls = [p["impl"] for s in tessera.backend.recent_summaries(-1) for p in s.partitions]
    assert "derived" in impls, impls


def test_derive_option_is_validated_and_off_by_default():
    assert parse_options(None, {}).derive is False
    assert parse_options(None, {"derive": True}).derive is True
    with pytest.raises(ValueError):
        parse_options(None, {"derive": 1})


def test_einnet_form_expression_is_rejected_by_kernel_and_exact_through_derive():
    """A band matmul in EinNet form reads outside B (implicit zero padding): tessera.Kernel
    refuses it with the range it reads instead of reading other memory, and the program
    _C.derive returns (explicit padding) gives the band product with zeros outside."""
    import tessera
    from tessera import _C
    a, b = tessera.placeholder("A", [2, 24, 8]), tessera.placeholder("B", [2, 24, 8])
    g = _C.derive_expr.g2bmm(a, b, 3, 2)
    with pytest.raises(Exception, match=r"reads B outside its shape.*\[-6, 29\]"):
        tessera.Kernel([g], [a, b])
    r = _C.derive([g], [a, b], depth=1, tune="default")
    k = tessera.Kernel(r["outputs"], [a, b])
    A, B = torch.randn(2, 24, 8), torch.randn(2, 24, 8)
    Bp = torch.nn.functional.pad(B, (0, 0, 6, 6))  # row r of B is row r + 6 of Bp
    want = torch.stack([torch.einsum("bmk,bmk->bm", A, Bp[:, 6 + 2 * (w - 3):][:, :24])
                        for w in range(7)], dim=-1)
    torch.testing.assert_close(k(A, B), want)
