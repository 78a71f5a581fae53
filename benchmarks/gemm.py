"""fp32 square GEMM: Tessera's default schedule (no tuning) vs torch.mm, on all cores.

    python benchmarks/gemm.py [--sizes 256 512 1024 2048] [--json out.json]

Per size a record {"op": "gemm", "shape": [M, N, K], "tessera_gflops", "torch_gflops",
"peak_gflops", "ratio_vs_torch", "jit_ms"}; peak_gflops is the machine's measured fp32 FMA
peak on all cores (tessera._C.peak_info()).
"""

from __future__ import annotations

import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import tessera  # noqa: E402
from common import arg_parser, interleaved, print_table, write_json  # noqa: E402


def bench_gemm(n: int, rounds: int, peak: float) -> dict:
    A = tessera.placeholder("A", [n, n])
    B = tessera.placeholder("B", [n, n])
    kernel = tessera.Kernel([tessera.te_ops.matmul(A, B)], [A, B], name=f"gemm{n}")
    a, b = torch.randn(n, n), torch.randn(n, n)
    c_t, c_ref = torch.empty(n, n), torch.empty(n, n)
    kernel(a, b, out=[c_t])
    torch.mm(a, b, out=c_ref)
    torch.testing.assert_close(c_t, c_ref, rtol=1e-4, atol=1e-3 * (n ** 0.5) / 16)
    times = interleaved({
        "tessera": lambda: kernel(a, b, out=[c_t]),
        "torch": lambda: torch.mm(a, b, out=c_ref),
    }, rounds=rounds, min_time_ms=max(100.0, n / 10))
    flops = 2.0 * n ** 3
    t_gf = flops / (times["tessera"] * 1e6)
    r_gf = flops / (times["torch"] * 1e6)
    return {"op": "gemm", "shape": [n, n, n], "tessera_gflops": t_gf, "torch_gflops": r_gf,
            "peak_gflops": peak, "ratio_vs_torch": t_gf / r_gf, "jit_ms": kernel.jit_ms,
            "threads": torch.get_num_threads()}


def main() -> None:
    p = arg_parser(__doc__)
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048])
    args = p.parse_args()
    peak = json.loads(tessera._C.peak_info())["fp32_gflops_all"]
    records = [bench_gemm(n, args.rounds, peak) for n in args.sizes]
    print_table(records, ["shape", "tessera_gflops", "torch_gflops", "peak_gflops",
                          "ratio_vs_torch", "jit_ms"])
    print(f"median jit_ms: {statistics.median(r['jit_ms'] for r in records):.1f}")
    write_json(args.json, records)


if __name__ == "__main__":
    main()
