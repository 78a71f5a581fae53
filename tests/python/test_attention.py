"""Tessera's fused attention kernel (_C.attention_kernel) and its place in compiled graphs
(backend/attention.py): every result is compared with ATen's CPU flash attention."""

import math

import pytest
import torch
import torch.nn.functional as F

import tessera
from tessera import _C
from tessera.backend import attention

SDPA = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
_OP_NAME = "aten._scaled_dot_product_flash_attention_for_cpu.default"


def _heads(batch, seq, heads, dim, generator):
    """A [batch, heads, seq, dim] view of a [batch, seq, heads, dim] tensor, as a projection
    split into heads gives it."""
    return torch.randn(batch, seq, heads, dim, generator=generator).transpose(1, 2)


def _spec(q, k, v, out, lse, causal, scale, mask=None):
    spec = {"batch": q.shape[0], "q_heads": q.shape[1], "kv_heads": k.shape[1],
            "q_len": q.shape[2], "kv_len": k.shape[2], "head_dim": q.shape[3],
            "value_dim": v.shape[3], "causal": causal, "scale": scale,
            "q_strides": list(q.stride()), "k_strides": list(k.stride()),
            "v_strides": list(v.stride()), "out_strides": list(out.stride()),
            "lse_strides": list(lse.stride())}
    if mask is not None:
        spec["mask_strides"] = [0 if s == 1 else st for s, st in zip(mask.shape, mask.stride())]
    return spec


@pytest.mark.parametrize("batch,heads,q_len,kv_len,dim,causal,masked", [
    (1, 4, 128, 128, 64, False, False),
    (2, 3, 37, 37, 32, True, False),
    (1, 2, 1, 77, 64, False, False),      # one query row: a decoder step
    (2, 2, 50, 70, 16, False, True),      # a padding mask shared by the heads
])
def test_kernel_matches_atens_flash_attention(batch, heads, q_len, kv_len, dim, causal, masked):
    g = torch.Generator().manual_seed(0)
    q = _heads(batch, q_len, heads, dim, g)
    k, v = _heads(batch, kv_len, heads, dim, g), _heads(batch, kv_len, heads, dim, g)
    mask = None
    if masked:
        mask = torch.zeros(batch, 1, q_len, kv_len)
        mask[..., -5:] = torch.finfo(torch.float32).min
    scale = 1 / math.sqrt(dim)
    want, want_lse = SDPA(q, k, v, 0.0, causal, attn_mask=mask, scale=scale)
    out, lse = torch.empty_strided(want.shape, want.stride()), \
        torch.empty_strided(want_lse.shape, want_lse.stride())
    kernel = _C.attention_kernel(_spec(q, k, v, out, lse, causal, scale, mask))
    ptrs = [q.data_ptr(), k.data_ptr(), v.data_ptr()] + ([mask.data_ptr()] if masked else [])
    kernel.run(ptrs + [out.data_ptr(), lse.data_ptr()])
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse, want_lse, rtol=1e-5, atol=1e-5)


def test_a_value_dim_it_cannot_vectorise_is_an_error():
    g = torch.Generator().manual_seed(0)
    q = k = v = _heads(1, 8, 2, 20, g)  # 20: a whole number of neither 8 nor 16 lanes
    out, lse = torch.empty(1, 2, 8, 20), torch.empty(1, 2, 8)
    with pytest.raises(Exception, match="multiple of the vector width"):
        _C.attention_kernel(_spec(q, k, v, out, lse, False, 0.2))


class SelfAttention(torch.nn.Module):
    def __init__(self, hidden=128, heads=2, causal=False):
        super().__init__()
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.heads, self.causal = heads, causal

    def forward(self, x, mask=None):
        b, s, h = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, h // self.heads).unbind(2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), attn_mask=mask,
                                           is_causal=self.causal)
        return y.transpose(1, 2).reshape(b, s, h)


def _compiled(model, *inputs):
    """The model compiled (no records database), checked against eager twice: the first call
    plans and measures, the second runs the plan."""
    with torch.no_grad():
        want = model(*inputs)
        torch._dynamo.reset()
        fast = torch.compile(model, backend="tessera", options={"records_db": False})
        for _ in range(2):
            torch.testing.assert_close(fast(*inputs), want, rtol=1e-4, atol=1e-4)
    return fast


def _attention_rows():
    return [p for p in tessera.backend.recent_summaries()[-1].partitions if p["ops"] == [_OP_NAME]]


@pytest.mark.parametrize("causal,masked", [(False, False), (True, False), (False, True)])
def test_compiled_attention_runs_tesseras_kernel_and_matches_eager(monkeypatch, causal, masked):
    monkeypatch.setenv("TESSERA_FORCE_CHOICE", "tessera")
    torch.manual_seed(0)
    model = SelfAttention(causal=causal).eval()
    x = torch.randn(2, 40, 128)
    mask = torch.zeros(2, 1, 40, 40) if masked else None
    if masked:
        mask[0, ..., -3:] = torch.finfo(torch.float32).min
    _compiled(model, x, mask)
    rows = _attention_rows()
    assert rows and all(r["impl"] == "tessera" for r in rows)
    assert not tessera.backend.recent_summaries()[-1].aten_ops  # nothing left to ATen


def test_attention_is_chosen_by_measurement_and_reported():
    torch.manual_seed(0)
    model = SelfAttention().eval()
    fast = _compiled(model, torch.randn(1, 64, 128))
    rows = _attention_rows()
    assert rows and set(rows[0]["times_ms"]) == {"aten", "tessera"}
    assert rows[0]["impl"] in ("aten", "tessera")
    assert "_scaled_dot_product_flash_attention_for_cpu" in str(tessera.explain(fast))


def test_the_kernels_tiles_are_chosen_among_timed_candidates(monkeypatch):
    seen = {}
    real_decide = attention.anchor_choice.decide

    def last_candidate_wins(key, candidates, options=None, **kw):
        _, times = real_decide(key, candidates, options, **kw)  # every candidate timed
        seen.update(candidates=list(candidates), times=times)
        return seen["candidates"][-1], times
    monkeypatch.setattr(attention.anchor_choice, "decide", last_candidate_wins)
    torch.manual_seed(0)
    model = SelfAttention(causal=True).eval()
    _compiled(model, torch.randn(1, 96, 128))
    tiled = [c for c in seen["candidates"] if c.startswith("tessera")]
    assert tiled[0] == "tessera" and len(tiled) >= 3  # the rules' tiles and others
    rows = _attention_rows()
    assert rows[0]["impl"] == "tessera"
    timed = [seen["times"][c] for c in tiled if c in seen["times"]]  # hopeless ones are dropped
    assert rows[0]["times_ms"]["tessera"] == min(timed)
    # The runner calls the winner's kernel: its tiles are in its name.
    (summary,) = [v for _, v in tessera.backend.compiled_graphs()[-1].summaries.items()]
    (step,) = [s for s in summary.steps if isinstance(s.call, attention.AttentionCall)]
    t = step.call.kernel.tiles
    assert tiled[-1] == f"tessera:kb{t['key_block']}-rt{t['row_tile']}-rpt{t['rows_per_task']}"


def test_unsupported_attention_stays_aten_with_its_reason(monkeypatch):
    monkeypatch.setenv("TESSERA_FORCE_CHOICE", "tessera")
    torch.manual_seed(0)
    model = SelfAttention(hidden=60, heads=3).eval()  # head dim 20: not whole vectors
    _compiled(model, torch.randn(1, 16, 60))
    rows = _attention_rows()
    assert rows and rows[0]["impl"] == "aten" and "vector width" in rows[0]["reason"]
    summary = tessera.backend.recent_summaries()[-1]
    assert "vector width" in summary.aten_reasons[_OP_NAME]


def test_a_call_it_was_not_built_for_goes_to_aten():
    g = torch.Generator().manual_seed(0)
    q = _heads(1, 32, 2, 16, g)
    want, want_lse = SDPA(q, q, q, 0.0, False)
    kernel = _C.attention_kernel(_spec(q, q, q, want, want_lse, False, 0.25))
    meta = tessera.backend.meta.describe
    call = attention.AttentionCall(kernel, (q.stride(),) * 3, meta(want), meta(want_lse),
                                   scale=0.25)
    got, got_lse = call(q, q, q, scale=0.25)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got_lse, want_lse, rtol=1e-5, atol=1e-5)
    assert got.stride() == want.stride()
    dense = q.contiguous()  # other strides, another scale: the kernel was not built for them
    torch.testing.assert_close(call(dense, dense, dense, scale=0.25)[0],
                               SDPA(dense, dense, dense, scale=0.25)[0])
    torch.testing.assert_close(call(q, q, q)[0], SDPA(q, q, q)[0])
    torch.testing.assert_close(call(q, q, q, 0.0, True, scale=0.25)[0],
                               SDPA(q, q, q, 0.0, True, scale=0.25)[0])
