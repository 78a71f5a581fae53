"""Band products in skewed register tiles (schedule/skewed_tiling.h), in one process.

    python benchmarks/band.py [--json out.json] [--rounds 5] [--cases window_d1 g2bmm_band_d2 ...]

A band product reads one operand at s + v (a row s of the output and its band lane v), as
Longformer's sliding-window attention does: each output row's band is the previous row's
shifted by one lane. The rules compute such a stage in skewed register tiles: 8 rows over one
window of lanes, each band vector loaded once for all rows. Side by side, paired rounds:

  skewed     Tessera, the rules' schedule (skew_axis set)
  unskewed   the same schedule with the skew taken out: the plain register tile, which loads
             every band vector once per row
  construct  Tessera's construct mode (measures the rules' schedule among its candidates)
  torch      the band gathered with Tensor.unfold, then torch.einsum

Every kernel is checked against torch first. Outputs are preallocated (out=) for Tessera, so the
times are the kernels' and not the page faults of a fresh 20 MB output per call.

Cases, [8, 10000, 64] operands, band 65 (Longformer's window of 2 x 32 + 1):
  window_d1       O[b, m, w] = sum(k) A[b, m, k] * B[b, k, m + w - 32] where that column
                  exists (tessera.op's where()), B given [b, k, n]: the dilation-1 window
  g2bmm_band_d2   O[b, q, p, w] = sum(k) A[b, 2q + p, k] * L[b, k, p, q + w]: the band product
                  EinNet's G2BMM derivation leaves for dilation 2 (derive.py's g2bmm cases)
  g2bmm_band_d4   the same for dilation 4

JSON: one record per case {"case", "skewed_ms", "unskewed_ms", "construct_ms", "torch_ms",
"skewed_vs_unskewed", "skewed_vs_torch", "gflops_skewed", "max_rel_err"}.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import tessera  # noqa: E402
from tessera import _C  # noqa: E402
from common import arg_parser, paired_with_reference, print_table, write_json  # noqa: E402

ROWS, K, HALF, BATCH = 10000, 64, 32, 8
BAND = 2 * HALF + 1


def window_d1():
    """The dilation-1 sliding window, zero outside B's columns."""
    col = f"m + w - {HALF}"
    source = (f"O[b, m, w] = sum(k) where({col} >= 0 and {col} < {ROWS}, "
              f"A[b, m, k] * B[b, k, {col}], 0.0)")
    shapes = {"A": [BATCH, ROWS, K], "B": [BATCH, K, ROWS]}

    def reference(a, b):
        padded = torch.nn.functional.pad(b, (HALF, HALF))  # [b, k, n + 2 half]
        return torch.einsum("bmk,bkmw->bmw", a, padded.unfold(2, BAND, 1))
    return source, shapes, {"w": BAND}, reference


def g2bmm_band(dilation: int):
    """The dilation-1 band over rows regrouped by residue (derive.py's derived G2BMM)."""
    def build():
        q = ROWS // dilation
        source = f"O[b, q, p, w] = sum(k) A[b, {dilation} * q + p, k] * L[b, k, p, q + w]"
        shapes = {"A": [BATCH, ROWS, K], "L": [BATCH, K, dilation, q + BAND - 1]}

        def reference(a, l):
            rows = a.view(BATCH, q, dilation, K)
            return torch.einsum("bqpk,bkpqw->bqpw", rows, l.unfold(3, BAND, 1))
        return source, shapes, {"w": BAND, "p": dilation}, reference
    return build


CASES = {"window_d1": window_d1, "g2bmm_band_d2": g2bmm_band(2), "g2bmm_band_d4": g2bmm_band(4)}


def without_skew(schedule) -> str:
    plain = json.loads(str(schedule))
    for stage in plain["stages"]:
        stage.pop("skew_axis", None)
    return json.dumps(plain)


def bench_case(name: str, args) -> dict:
    source, shapes, extents, reference = CASES[name]()
    dtypes = {n: "float32" for n in shapes}
    outputs, inputs = _C.expression_to_te(source, shapes, dtypes, extents)
    skewed = tessera.Kernel(list(outputs), list(inputs), tune="default", name=f"{name}_skewed")
    stage = json.loads(str(skewed.schedule))["stages"][-1]
    if stage.get("skew_axis", -1) < 0:
        raise RuntimeError(f"{name}: the rules did not skew the band product: {skewed.schedule}")
    kernels = {"skewed": skewed,
               "unskewed": tessera.Kernel(list(outputs), list(inputs), name=f"{name}_unskewed",
                                          schedule=without_skew(skewed.schedule)),
               "construct": tessera.Kernel(list(outputs), list(inputs), tune="construct",
                                           name=f"{name}_construct")}
    torch.manual_seed(0)
    data = [torch.randn(*shapes[t.name]) for t in inputs]
    want = reference(*data)
    outs, errs = {}, {}
    for key, k in kernels.items():
        outs[key] = k(*data)
        errs[key] = ((outs[key] - want).abs().max() / want.abs().max()).item()
        if errs[key] > 1e-4:
            raise RuntimeError(f"{name}: {key} differs from torch (max rel err {errs[key]:.2e})")
    fns = {key: (lambda k=k, o=outs[key]: k(*data, out=[o])) for key, k in kernels.items()}
    ratios = paired_with_reference(fns, lambda: reference(*data), rounds=args.rounds,
                                   min_time_ms=100.0)
    torch_ms = ratios.pop("reference")
    ms = {key: r * torch_ms for key, r in ratios.items()}
    flops = 2.0 * BATCH * ROWS * BAND * K
    return {"case": name, "skewed_ms": ms["skewed"], "unskewed_ms": ms["unskewed"],
            "construct_ms": ms["construct"], "torch_ms": torch_ms,
            "skewed_vs_unskewed": ms["unskewed"] / ms["skewed"],
            "skewed_vs_torch": torch_ms / ms["skewed"],
            "gflops_skewed": flops / ms["skewed"] / 1e6, "max_rel_err": max(errs.values()),
            "construct_schedule": str(kernels["construct"].schedule)}


def main() -> None:
    p = arg_parser(__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    args = p.parse_args()
    records = []
    for name in args.cases:
        records.append(bench_case(name, args))
        print(f"{name}: skewed {records[-1]['skewed_ms']:.2f} ms", flush=True)
    print_table(records, ["case", "skewed_ms", "unskewed_ms", "construct_ms", "torch_ms",
                          "skewed_vs_unskewed", "skewed_vs_torch", "gflops_skewed",
                          "max_rel_err"])
    write_json(args.json, records)


if __name__ == "__main__":
    main()
