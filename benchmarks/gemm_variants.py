"""fp32 GEMM: the default schedule with annotation fields overridden, side by side with torch,
timed interleaved in one process.

    python benchmarks/gemm_variants.py [--size 2048] [--linear M K N] [--cold-weights 24]
        [--threads 2] [--variants '{"rolled": {"reduce_unroll": 1}, "no_hints": {"prefetch": false}}']

Each variant is the rules' schedule for the GEMM with the given fields of its one stage replaced
("default" is always included). Per variant a record {"variant", "overrides", "shape",
"cold_weights", "gflops", "ratio_vs_torch"}. The defaults compare the inner reduce loop rolled,
unrolled by 4 (the rules' choice, with prefetch hints), by 8, and by 4 without the hints.

--size N: a square matmul (torch.mm). --linear M K N: a layer, X[M, K] times a weight W[N, K]
transposed (torch.nn.functional.linear), the weight read prepacked as in a compiled inference
graph. --cold-weights W (with --linear only): W distinct weights, each with its own kernel,
called in turn, so that every call reads its weight from beyond L2 as a model's layers do;
GFLOP/s count the work of one call.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import tessera  # noqa: E402
from common import arg_parser, interleaved, print_table, write_json  # noqa: E402

DEFAULT_VARIANTS = {
    "rolled": {"reduce_unroll": 1, "prefetch": False},
    "unroll8": {"reduce_unroll": 8},
    "unroll4_no_prefetch": {"reduce_unroll": 4, "prefetch": False},
}


def square_case(n: int):
    """(outputs, inputs, weight positions, example inputs, torch function) of an n^3 matmul."""
    A, B = tessera.placeholder("A", [n, n]), tessera.placeholder("B", [n, n])
    a, b = torch.randn(n, n), torch.randn(n, n)
    c = torch.empty(n, n)
    return [tessera.te_ops.matmul(A, B)], [A, B], (), [[a, b]], lambda: torch.mm(a, b, out=c)


def linear_case(m: int, k: int, n: int, weights: int):
    """The same for a layer X[m, k] W[n, k]^T over `weights` distinct weights."""
    X, W = tessera.placeholder("X", [m, k]), tessera.placeholder("W", [n, k])
    x = torch.randn(m, k)
    ws = [torch.randn(n, k) for _ in range(weights)]

    def run_torch():
        for w in ws:
            torch.nn.functional.linear(x, w)
    return [tessera.te_ops.dense(X, W)], [X, W], (1,), [[x, w] for w in ws], run_torch


def main() -> None:
    p = arg_parser(__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=2048)
    p.add_argument("--linear", type=int, nargs=3, metavar=("M", "K", "N"))
    p.add_argument("--cold-weights", type=int, default=1, metavar="W")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave)")
    p.add_argument("--variants", default=json.dumps(DEFAULT_VARIANTS),
                   help="JSON object: variant name -> annotation fields to override")
    args = p.parse_args()
    if args.cold_weights != 1 and not args.linear:
        p.error("--cold-weights needs --linear M K N")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.linear:
        m, k, n = args.linear
        outputs, inputs, weights, calls, run_torch = linear_case(m, k, n, args.cold_weights)
    else:
        m = k = n = args.size
        outputs, inputs, weights, calls, run_torch = square_case(n)
    default_schedule = tessera.te_ops.default_schedule(outputs, inputs)
    variants = {"default": {}, **json.loads(args.variants)}

    fns = {}
    for name, overrides in variants.items():
        sched = json.loads(default_schedule.dump())
        sched["stages"][-1].update(overrides)
        runs = []
        for args_i in calls:  # one kernel per weight: each keeps its own packed copy
            kernel = tessera.Kernel(outputs, inputs, schedule=json.dumps(sched),
                                    name=f"gemm_{name}", weights=weights)
            out = kernel(*args_i)
            want = args_i[0] @ (args_i[1].t() if weights else args_i[1])
            torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-3 * (k ** 0.5) / 16)
            runs.append((kernel, args_i, out))

        def run(runs=runs):
            for kernel, args_i, out in runs:
                kernel(*args_i, out=[out])
        fns[name] = run
    fns["torch"] = run_torch
    times = interleaved(fns, rounds=args.rounds, min_time_ms=max(100.0, n / 10))

    flops = 2.0 * m * k * n * len(calls)
    shape = [m, k, n]
    records = [{"variant": name, "overrides": variants.get(name, {}), "shape": shape,
                "cold_weights": len(calls), "gflops": flops / (t * 1e6),
                "ratio_vs_torch": times["torch"] / t}
               for name, t in times.items()]
    kind = f"linear {m}x{k}x{n}" if args.linear else f"GEMM {n}"
    print(f"{kind}, {len(calls)} weight(s) in turn, {torch.get_num_threads()} threads, "
          f"median of {args.rounds} rounds")
    print_table(records, ["variant", "gflops", "ratio_vs_torch"])
    write_json(args.json, records)


if __name__ == "__main__":
    main()
