"""DietCode (dynamic shapes): one tuned artifact for every sequence length vs per-shape tuning.

    python benchmarks/dynamic.py [--tmax 128] [--step 1] [--rows 16] [--k 768] [--n 2304]
                                 [--json out.json]

The dense layer Y = X W^T, X [rows*T, k], W [n, k], for T in 1..tmax. DietCode tunes once over
the whole range (tessera._C.dynamic.tune); the baseline tunes each sampled T on its own
(construct mode, tessera.Kernel(tune="construct")). Per T a record {"T", "per_shape_ms",
"dietcode_ms", "speed" (per-shape time / DietCode time: >= 1 is DietCode faster), "kernel"};
then a summary with the issue's bars: geomean speed >= 0.97, min >= 0.85, <= 12 micro-kernels,
tuning <= 1.5x one per-shape tuning (the mean over the sampled T), dispatch <= 1 us.
"""

from __future__ import annotations

import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import tessera  # noqa: E402
from tessera import _C  # noqa: E402
from common import arg_parser, paired_with_reference, print_table, write_json  # noqa: E402


def dense(rows, k: int, n: int):
    x = tessera.placeholder("X", [rows, k])
    w = tessera.placeholder("W", [n, k])
    return tessera.te_ops.dense(x, w), x, w


def main() -> None:
    p = arg_parser(__doc__)
    p.add_argument("--tmax", type=int, default=128)
    p.add_argument("--step", type=int, default=1, help="per-shape baseline on every step-th T")
    p.add_argument("--rows", type=int, default=16)
    p.add_argument("--k", type=int, default=768)
    p.add_argument("--n", type=int, default=2304)
    args = p.parse_args()

    T = tessera.size_var("T", 1, args.tmax)
    y, x, w = dense(_C.dynamic.scaled(T, args.rows), args.k, args.n)
    t0 = time.perf_counter()
    dyn = _C.dynamic.tune([y], [x, w], name="dense")
    dyn_s = time.perf_counter() - t0
    sizes = [[t] for t in range(1, args.tmax + 1)]
    dispatch_ns = dyn.dispatch_ns(sizes)
    print(f"dietcode: {dyn.num_kernels} micro-kernels, tuned in {dyn_s:.1f} s, "
          f"dispatch {dispatch_ns:.1f} ns")

    wt = torch.randn(args.n, args.k)
    records, tune_s = [], []
    for t in range(args.tmax, 0, -args.step):
        ys, xs, ws = dense(args.rows * t, args.k, args.n)
        t0 = time.perf_counter()
        per_shape = tessera.Kernel([ys], [xs, ws], name=f"dense_T{t}", tune="construct")
        tune_s.append(time.perf_counter() - t0)
        xt = torch.randn(args.rows * t, args.k)
        want = torch.nn.functional.linear(xt, wt)
        out = torch.empty_like(want)
        ptrs = [xt.data_ptr(), wt.data_ptr(), out.data_ptr()]
        dyn.run(ptrs, [t])
        torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-3)
        out_ref = torch.empty_like(want)
        ratios = paired_with_reference(
            {"dietcode": lambda: dyn.run(ptrs, [t])},
            reference=lambda: per_shape(xt, wt, out=[out_ref]), rounds=args.rounds,
            min_time_ms=20.0)
        ms = ratios["reference"]
        records.append({"T": t, "per_shape_ms": ms, "dietcode_ms": ms * ratios["dietcode"],
                        "speed": 1.0 / ratios["dietcode"], "kernel": dyn.dispatch([t])})
    print_table(records, ["T", "per_shape_ms", "dietcode_ms", "speed", "kernel"])
    speeds = [r["speed"] for r in records]
    summary = {"geomean_speed": math.exp(sum(math.log(s) for s in speeds) / len(speeds)),
               "min_speed": min(speeds), "kernels": dyn.num_kernels, "dietcode_tune_s": dyn_s,
               "per_shape_tune_s_mean": sum(tune_s) / len(tune_s),
               "dispatch_ns": dispatch_ns}
    summary["tune_ratio"] = summary["dietcode_tune_s"] / summary["per_shape_tune_s_mean"]
    bars = {"geomean_speed": summary["geomean_speed"] >= 0.97,
            "min_speed": summary["min_speed"] >= 0.85, "kernels": dyn.num_kernels <= 12,
            "tune_ratio": summary["tune_ratio"] <= 1.5, "dispatch": dispatch_ns <= 1000}
    print("summary:", {k: round(v, 3) if isinstance(v, float) else v for k, v in summary.items()})
    print("bars met:", bars)
    write_json(args.json, records + [{"summary": summary, "bars": bars}])


if __name__ == "__main__":
    main()
