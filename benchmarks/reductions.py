"""Reductions with Tessera's default schedules against torch, fp32, all cores: speed and accuracy.

    python benchmarks/reductions.py [--json out.json] [--ops row_sum full_sum ...] [--rounds 5]

Per op a record
  {"op", "shape", "ms": {"tessera", "torch"}, "speed_vs_torch" (torch ms / tessera ms),
   "rel_err": {"tessera", "torch"}}
where rel_err is the largest error of the fp32 result relative to the float64 result's largest
magnitude. Each Tessera kernel is timed between two torch timings, round by round
(common.paired_with_reference). Long sums (more than 8192 values per output) run as trees of
chunk sums (csrc/schedule/split_reduction.h): `full_sum`, `full_mean`, `col_sum`, `long_rows`
and `softmax_vocab` exercise that path; the others must not be affected by it.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import tessera  # noqa: E402
from common import arg_parser, paired_with_reference, print_table, write_json  # noqa: E402

T = tessera.te_ops


class Case:
    def __init__(self, name: str, shape: List[int], build: Callable, torch_fn: Callable):
        self.name, self.shape, self.build, self.torch_fn = name, shape, build, torch_fn


def suite() -> List[Case]:
    def reduce(name, shape, fn, torch_fn):
        return Case(name, shape, lambda x: fn(x), torch_fn)
    return [
        reduce("row_sum", [4096, 4096], lambda x: T.reduce_sum(x, [1], False),
               lambda x: x.sum(1)),
        reduce("row_max", [4096, 4096], lambda x: T.reduce_max(x, [1], False),
               lambda x: x.amax(1)),
        reduce("long_rows", [64, 131072], lambda x: T.reduce_sum(x, [1], False),
               lambda x: x.sum(1)),
        reduce("col_sum", [262144, 64], lambda x: T.reduce_sum(x, [0], False),
               lambda x: x.sum(0)),
        reduce("full_sum", [1 << 24], lambda x: T.reduce_sum(x, [], False), lambda x: x.sum()),
        reduce("full_mean", [8192, 4096], lambda x: T.reduce_mean(x, [], False),
               lambda x: x.mean()),
        reduce("softmax", [1024, 4096], lambda x: T.softmax(x, -1),
               lambda x: torch.softmax(x, -1)),
        reduce("softmax_vocab", [64, 32000], lambda x: T.softmax(x, -1),
               lambda x: torch.softmax(x, -1)),
        reduce("layer_norm", [2048, 1024], lambda x: T.layer_norm(x, 1),
               lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:])),
    ]


def rel_err(got: torch.Tensor, want64: torch.Tensor) -> float:
    scale = max(want64.abs().max().item(), 1e-30)
    return (got.double() - want64).abs().max().item() / scale


def bench(case: Case, rounds: int, min_time_ms: float) -> dict:
    x_ph = tessera.placeholder("x", case.shape)
    kernel = tessera.Kernel([case.build(x_ph)], [x_ph], name=case.name)
    torch.manual_seed(0)
    x = torch.randn(case.shape) + 1  # an offset, so sums do not cancel to nothing
    want64 = case.torch_fn(x.double())
    got, eager = kernel(x), case.torch_fn(x)
    errors = {"tessera": rel_err(got, want64), "torch": rel_err(eager, want64)}
    if errors["tessera"] > max(1e-5, 20 * errors["torch"]):
        raise RuntimeError(f"{case.name}: Tessera's result is off by {errors['tessera']:.3g} "
                           f"(torch {errors['torch']:.3g})")
    out = [got]
    ratios = paired_with_reference({"tessera": lambda: kernel(x, out=out)},
                                   lambda: case.torch_fn(x), rounds=rounds,
                                   min_time_ms=min_time_ms)
    torch_ms = ratios.pop("reference")
    ms = {"tessera": ratios["tessera"] * torch_ms, "torch": torch_ms}
    return {"op": case.name, "shape": case.shape, "ms": ms,
            "speed_vs_torch": torch_ms / ms["tessera"], "rel_err": errors,
            "threads": torch.get_num_threads()}


def main() -> None:
    p = arg_parser(__doc__.splitlines()[0])
    p.add_argument("--ops", nargs="*", help="run only these cases")
    p.add_argument("--min-time-ms", type=float, default=100.0)
    args = p.parse_args()
    cases = [c for c in suite() if not args.ops or c.name in args.ops]
    records = []
    for c in cases:
        r = bench(c, args.rounds, args.min_time_ms)
        records.append(r)
        print(f"{c.name}: {r['speed_vs_torch']:.2f}x torch, rel err {r['rel_err']['tessera']:.2g} "
              f"(torch {r['rel_err']['torch']:.2g})", flush=True)
    rows = [{"op": r["op"], "tessera_ms": r["ms"]["tessera"], "torch_ms": r["ms"]["torch"],
             "speed_vs_torch": r["speed_vs_torch"], "err_tessera": r["rel_err"]["tessera"],
             "err_torch": r["rel_err"]["torch"]} for r in records]
    print_table(rows, ["op", "tessera_ms", "torch_ms", "speed_vs_torch", "err_tessera",
                       "err_torch"])
    write_json(args.json, records)


if __name__ == "__main__":
    main()
