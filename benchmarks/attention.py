"""Tessera's fused attention kernel against ATen's CPU flash attention, fp32, all cores.

    python benchmarks/attention.py [--json out.json] [--rounds 5] [--cases bert gpt2 ...]

The attention shapes of the models in models.py at batch 1 (and of the demo's small BERT, and a
longer causal sequence), with Q, K and V as transformers pass them: views of [batch, seq, heads,
dim] projections. Per case a record
  {"case", "shape": [batch, q_heads, kv_heads, seq, head_dim], "causal", "ms": {"tessera",
   "tessera_rules", "aten"}, "speed_vs_aten" (aten ms / tessera ms), "rules_speed_vs_aten",
   "max_err", "tiles", "candidates"}
"tessera" is the best of the tile candidates the backend times (_C.attention_tile_candidates),
"tessera_rules" the rules' tiles alone. Both outputs (attention and logsumexp) of every candidate
are checked against ATen's before timing; each Tessera timing sits between two ATen timings,
round by round (common.paired_with_reference). In a compiled model the backend makes the same
comparison per attention node and keeps the fastest (backend/attention.py).
"""

from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from tessera import _C  # noqa: E402
from common import arg_parser, paired_with_reference, print_table, write_json  # noqa: E402

SDPA = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default

# name -> (batch, q_heads, kv_heads, seq, head_dim, causal)
CASES = {
    "demo_bert": (1, 4, 4, 128, 64, False),
    "bert": (1, 12, 12, 128, 64, False),
    "gpt2": (1, 12, 12, 128, 64, True),
    "vit": (1, 12, 12, 197, 64, False),
    "causal_1024": (1, 12, 12, 1024, 64, True),
}


def run_case(name: str, rounds: int) -> dict:
    batch, heads, kv_heads, seq, dim, causal = CASES[name]
    g = torch.Generator().manual_seed(0)
    q = torch.randn(batch, seq, heads, dim, generator=g).transpose(1, 2)
    k = torch.randn(batch, seq, kv_heads, dim, generator=g).transpose(1, 2)
    v = torch.randn(batch, seq, kv_heads, dim, generator=g).transpose(1, 2)
    want, want_lse = SDPA(q, k, v, 0.0, causal)
    spec = {"batch": batch, "q_heads": heads, "kv_heads": kv_heads, "q_len": seq,
            "kv_len": seq, "head_dim": dim, "value_dim": dim, "causal": causal,
            "scale": 1 / math.sqrt(dim), "q_strides": list(q.stride()),
            "k_strides": list(k.stride()), "v_strides": list(v.stride()),
            "out_strides": list(want.stride()), "lse_strides": list(want_lse.stride())}
    out = torch.empty_strided(want.shape, want.stride())
    lse = torch.empty_strided(want_lse.shape, want_lse.stride())
    ptrs = [q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr()]
    # Every tile candidate the backend would time (the rules' first), each checked.
    kernels, max_err = {}, 0.0
    for i, tiles in enumerate(_C.attention_tile_candidates(spec)):
        kernel = _C.attention_kernel(spec, tiles)
        kernel.run(ptrs)
        torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(lse, want_lse, rtol=1e-4, atol=1e-4)
        max_err = max(max_err, (out - want).abs().max().item())
        kernels["rules" if i == 0 else f"candidate{i}"] = kernel
    r = paired_with_reference({n: (lambda k=k: k.run(ptrs)) for n, k in kernels.items()},
                              lambda: SDPA(q, k, v, 0.0, causal), rounds=rounds,
                              min_time_ms=50.0)
    aten_ms = r["reference"]
    best = min(kernels, key=lambda n: r[n])
    return {"case": name, "shape": [batch, heads, kv_heads, seq, dim], "causal": causal,
            "ms": {"tessera": r[best] * aten_ms, "tessera_rules": r["rules"] * aten_ms,
                   "aten": aten_ms},
            "speed_vs_aten": 1 / r[best], "rules_speed_vs_aten": 1 / r["rules"],
            "max_err": max_err, "tiles": kernels[best].tiles, "candidates": len(kernels)}


def main() -> None:
    p = arg_parser(__doc__.split("\n\n")[0])
    p.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    args = p.parse_args()
    records = [run_case(name, args.rounds) for name in args.cases]
    rows = [{"case": r["case"], "causal": r["causal"], "aten_ms": r["ms"]["aten"],
             "rules_ms": r["ms"]["tessera_rules"], "best_ms": r["ms"]["tessera"],
             "speed_vs_aten": r["speed_vs_aten"], "best_tiles": "kb{key_block}-rt{row_tile}-"
             "rpt{rows_per_task}".format(**r["tiles"]), "max_err": r["max_err"]}
            for r in records]
    print_table(rows, ["case", "causal", "aten_ms", "rules_ms", "best_ms", "speed_vs_aten",
                       "best_tiles", "max_err"])
    write_json(args.json, records)


if __name__ == "__main__":
    main()
