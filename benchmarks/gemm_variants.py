"""fp32 square GEMM: the default schedule with annotation fields overridden, side by side with
torch.mm, timed interleaved in one process.

    python benchmarks/gemm_variants.py [--size 2048] [--threads 2] \
        [--variants '{"rolled": {"reduce_unroll": 1}, "hinted": {"prefetch": true}}']

Each variant is the rules' schedule for the GEMM with the given fields of its one stage replaced
("default" is always included). Per variant a record {"variant", "overrides", "gflops",
"ratio_vs_torch"}. The defaults compare the inner reduce loop rolled, unrolled by 4 (the rules'
choice), by 8, and by 4 with prefetch hints.
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
    "rolled": {"reduce_unroll": 1},
    "unroll8": {"reduce_unroll": 8},
    "unroll4_prefetch": {"reduce_unroll": 4, "prefetch": True},
}


def main() -> None:
    p = arg_parser(__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=2048)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave)")
    p.add_argument("--variants", default=json.dumps(DEFAULT_VARIANTS),
                   help="JSON object: variant name -> annotation fields to override")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    n = args.size
    A, B = tessera.placeholder("A", [n, n]), tessera.placeholder("B", [n, n])
    C = tessera.te_ops.matmul(A, B)
    default_schedule = tessera.te_ops.default_schedule([C], [A, B])
    a, b = torch.randn(n, n), torch.randn(n, n)
    want = a @ b
    variants = {"default": {}, **json.loads(args.variants)}

    fns = {}
    for name, overrides in variants.items():
        sched = json.loads(default_schedule.dump())
        sched["stages"][-1].update(overrides)
        kernel = tessera.Kernel([C], [A, B], schedule=json.dumps(sched), name=f"gemm_{name}")
        out = kernel(a, b)
        torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-3 * (n ** 0.5) / 16)
        fns[name] = lambda k=kernel, o=[out]: k(a, b, out=o)
    c = torch.empty(n, n)
    fns["torch"] = lambda: torch.mm(a, b, out=c)
    times = interleaved(fns, rounds=args.rounds, min_time_ms=max(100.0, n / 10))

    flops = 2.0 * n ** 3
    records = [{"variant": name, "overrides": variants.get(name, {}),
                "gflops": flops / (t * 1e6), "ratio_vs_torch": times["torch"] / t}
               for name, t in times.items()]
    print(f"GEMM {n}, {torch.get_num_threads()} threads, median of {args.rounds} rounds")
    print_table(records, ["variant", "gflops", "ratio_vs_torch"])
    write_json(args.json, records)


if __name__ == "__main__":
    main()
