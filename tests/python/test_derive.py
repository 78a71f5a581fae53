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
