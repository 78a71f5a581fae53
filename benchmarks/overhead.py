"""Per-call overhead of a compiled graph, layer by layer.

    python benchmarks/overhead.py [--json out.json]

A graph whose work is negligible (a fused elementwise chain on 16 floats) shows what a call
costs besides the kernel:
  eager           the same ops run eagerly (three ATen calls)
  compiled        torch.compile(backend="tessera"): dynamo guards + aot_autograd wrapper +
                  Tessera runner + kernel
  aot_eager       torch.compile(backend="aot_eager"): the dynamo + aot_autograd share alone
  runner          the generated Tessera runner called directly
  kernel_call     the KernelCall wrapper (tensor checks, output allocation, pointer list)
  kernel_run      the C++ kernel on prepared pointers (thread-pool dispatch + the work)
and a graph of N fused-away ops and of N ATen fallback ops shows the cost per runner step.
All in microseconds (medians of interleaved rounds).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import tessera  # noqa: E402
from common import arg_parser, interleaved, print_table, write_json  # noqa: E402


def layers(rounds: int) -> list:
    def fn(x):
        return torch.relu(x * 2.0 + 1.0)

    def same_fn(x):  # its own code object, so dynamo caches it separately
        return torch.relu(x * 2.0 + 1.0)
    x = torch.randn(16)
    torch._dynamo.reset()
    since = tessera.backend.last_serial()
    compiled = torch.compile(fn, backend="tessera", options={"anchor_measure": False})
    compiled(x)
    compiled(x)
    graph = [g for g in tessera.backend.compiled_graphs() if g.serial > since][-1]
    runner = graph._runners[None]
    (step,) = [s for s in graph.summaries[None].steps if s.kind == "kernel"]
    call = step.call
    out = torch.empty(16)
    ptrs = [x.data_ptr(), out.data_ptr()]
    run = call.kernel.run
    aot = torch.compile(same_fn, backend="aot_eager")
    aot(x)
    times = interleaved({
        "eager": lambda: fn(x),
        "compiled": lambda: compiled(x),
        "aot_eager": lambda: aot(x),
        "runner": lambda: runner([x]),
        "kernel_call": lambda: call(x),
        "kernel_run": lambda: run(ptrs, []),
    }, rounds=rounds, min_time_ms=100.0)
    return [{"case": "3 fused ops on 16 floats", "layer": k, "us": v * 1e3}
            for k, v in times.items()]


def per_step(rounds: int, n: int = 20) -> list:
    """N ops that all fuse into one kernel vs N ops Tessera leaves to ATen (cumsum)."""
    def fused(x):
        for _ in range(n):
            x = torch.tanh(x) * 0.5
        return x

    def aten_steps(x):
        for _ in range(n):
            x = torch.cumsum(x, 0)
        return x
    x = torch.randn(16)
    opts = {"anchor_measure": False}
    records = []
    for name, fn in [(f"{n} fused ops", fused), (f"{n} ATen fallback ops", aten_steps)]:
        torch._dynamo.reset()
        c = torch.compile(fn, backend="tessera", options=opts)
        c(x)
        c(x)
        times = interleaved({"eager": lambda: fn(x), "compiled": lambda: c(x)}, rounds=rounds,
                            min_time_ms=100.0)
        records += [{"case": name, "layer": k, "us": v * 1e3} for k, v in times.items()]
    return records


def main() -> None:
    p = arg_parser(__doc__)
    args = p.parse_args()
    records = layers(args.rounds) + per_step(args.rounds)
    print_table(records, ["case", "layer", "us"])
    write_json(args.json, records)


if __name__ == "__main__":
    main()
