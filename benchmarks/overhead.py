"""Per-call overhead of a compiled graph, layer by layer, vs eager.

    python benchmarks/overhead.py [--json out.json] [--rounds N] [--threads N]

Graphs whose work is negligible show what a call costs besides the kernels. Every case is timed
eagerly and compiled; `x eager` is each row's median over the eager median of its case.

Case "3 fused ops on 16 floats" (relu(x * 2 + 1): one Tessera kernel), layer by layer:
  eager             the same ops run eagerly (three ATen calls)
  compiled          torch.compile(backend="tessera"), the default path: dynamo guards +
                    aot_autograd wrapper + generated runner + one C++ Program call
  compiled_pykernel the same with kernels called one by one from Python (KernelCall), the
                    executor before C++ programs (TESSERA_PROGRAM=0)
  compiled_via_op   the same with the graph called through its custom operator
                    (TESSERA_GRAPH_OP=1): + dispatcher, signature check, output reassembly
  exported          tessera.export(fn, args): torch.export's graph compiled ahead of time and
                    called without dynamo (input check + the runner); every case has this row
  aot_eager         torch.compile(backend="aot_eager"): the dynamo + aot_autograd share alone
  runner            the generated runner called directly (C++ Program)
  runner_pykernel   the generated runner with Python KernelCalls
  graph_op          the custom operator called directly (torch.ops.tessera.graph_N...)
  program           the C++ Program on prepared pointers (one call, GIL released)
  kernel_call       the Python KernelCall wrapper (checks, output allocation, pointer lists)
  kernel_run        the C++ kernel on prepared pointers
Case "4 kernels in a chain": four small matmul kernels (anchor_measure off), where a Program
runs all four in one call and keeps the three intermediates in its arena.
Case "tiny transformer block": seven kernels with reshapes and weight transposes between them;
one Program call (views absorbed, weights read in place) vs seven KernelCalls + ATen views.
Cases "20 fused ops" / "20 ATen fallback ops": the cost per runner step. For the ATen case:
  runner            the generated runner: one C++ AtenSequence call for the 20 operators
  compiled_pyaten   compiled with one Python call per operator (TESSERA_ATEN_SEQUENCE=0)
  runner_pyaten     that runner called directly
  dynamo_floor      torch.compile with a backend returning the FX graph itself: the 20 ATen
                    calls plus what dynamo costs any backend
All in microseconds (medians of interleaved rounds).
"""

from __future__ import annotations

import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import tessera  # noqa: E402
from common import arg_parser, interleaved, print_table, write_json  # noqa: E402
from tessera.backend import aten_sequence  # noqa: E402
from tessera.backend import graph as graph_mod  # noqa: E402
from tessera.backend import program_runner  # noqa: E402
from tessera.models import TransformerBlock  # noqa: E402

OPTS = {"anchor_measure": False}


def _fresh(fn):
    """A copy of fn with its own code object: dynamo caches compiled code per code object, so
    each copy compiles (and keeps) its own graph."""
    code = fn.__code__.replace(co_name=fn.__code__.co_name + "_copy")
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)


def _compile(fn, args, programs: bool = True, via_op: bool = False, sequences: bool = True):
    """(compiled callable, its CompiledGraph) with the executor switches set while it compiles
    and, for via_op, whenever it runs."""
    since = tessera.backend.last_serial()
    old = program_runner.ENABLED, aten_sequence.ENABLED
    program_runner.ENABLED, aten_sequence.ENABLED = programs, sequences
    try:
        c = torch.compile(_fresh(fn), backend="tessera", options=OPTS)
        c(*args)
        c(*args)
    finally:
        program_runner.ENABLED, aten_sequence.ENABLED = old
    graph = [g for g in tessera.backend.compiled_graphs() if g.serial > since][-1]
    if not via_op:
        return c, graph

    def call():
        graph_mod.CALL_VIA_OP = True
        try:
            return c(*args)
        finally:
            graph_mod.CALL_VIA_OP = False
    call()
    return (lambda *a: call()), graph


def _export(fn, args):
    """tessera.export of fn, called twice (compiled, then on its fast path)."""
    e = tessera.export(fn, args, options=OPTS)
    e(*args)
    e(*args)
    return e


def _records(case: str, times: dict) -> list:
    eager = times["eager"]
    return [{"case": case, "layer": k, "us": v * 1e3, "x eager": v / eager}
            for k, v in times.items()]


def layers(rounds: int) -> list:
    def fn(x):
        return torch.relu(x * 2.0 + 1.0)
    x = torch.randn(16)
    torch._dynamo.reset()
    compiled, graph = _compile(fn, (x,))
    pyk, pyk_graph = _compile(fn, (x,), programs=False)
    via_op, _ = _compile(fn, (x,), via_op=True)
    runner = graph.static_runner()
    pyk_runner = pyk_graph.static_runner()
    (seg,) = graph.summaries.get(None).segments
    prog = seg.program
    (step,) = [s for s in pyk_graph.summaries.get(None).steps if s.kind == "kernel"]
    call = step.call
    out = torch.empty(16)
    ptrs = [x.data_ptr(), out.data_ptr()]
    run = call.kernel.run
    op = graph.op
    op(x)
    aot = torch.compile(_fresh(fn), backend="aot_eager")
    aot(x)
    exported = _export(fn, (x,))
    times = interleaved({
        "eager": lambda: fn(x),
        "compiled": lambda: compiled(x),
        "exported": lambda: exported(x),
        "compiled_pykernel": lambda: pyk(x),
        "compiled_via_op": lambda: via_op(x),
        "aot_eager": lambda: aot(x),
        "runner": lambda: runner([x]),
        "runner_pykernel": lambda: pyk_runner([x]),
        "graph_op": lambda: op(x),
        "program": lambda: prog(*ptrs),
        "kernel_call": lambda: call(x),
        "kernel_run": lambda: run(ptrs, []),
    }, rounds=rounds, min_time_ms=100.0)
    return _records("3 fused ops on 16 floats", times)


def chain(rounds: int) -> list:
    def fn(x, w):
        for _ in range(4):
            x = torch.tanh(x @ w)
        return x
    x, w = torch.randn(4, 8), torch.randn(8, 8) * 0.3
    torch._dynamo.reset()
    compiled, graph = _compile(fn, (x, w))
    pyk, _ = _compile(fn, (x, w), programs=False)
    via_op, _ = _compile(fn, (x, w), via_op=True)
    runner = graph.static_runner()
    exported = _export(fn, (x, w))
    times = interleaved({
        "eager": lambda: fn(x, w),
        "compiled": lambda: compiled(x, w),
        "exported": lambda: exported(x, w),
        "compiled_pykernel": lambda: pyk(x, w),
        "compiled_via_op": lambda: via_op(x, w),
        "runner": lambda: runner([x, w]),
    }, rounds=rounds, min_time_ms=100.0)
    return _records("4 kernels in a chain", times)


def block(rounds: int) -> list:
    torch.manual_seed(0)
    model = TransformerBlock().eval()
    x = torch.randn(2, 6, 32)

    def fn(x):
        return model(x)
    with torch.no_grad():
        torch._dynamo.reset()
        compiled, graph = _compile(fn, (x,))
        pyk, _ = _compile(fn, (x,), programs=False)
        exported = _export(model, (x,))
        times = interleaved({
            "eager": lambda: fn(x),
            "compiled": lambda: compiled(x),
            "exported": lambda: exported(x),
            "compiled_pykernel": lambda: pyk(x),
        }, rounds=rounds, min_time_ms=100.0)
    return _records(f"tiny transformer block ({graph.summaries.get(None).kernels} kernels)", times)


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
    records = []
    for name, fn in [(f"{n} fused ops", fused), (f"{n} ATen fallback ops", aten_steps)]:
        torch._dynamo.reset()
        c, graph = _compile(fn, (x,))
        runner = graph.static_runner()
        exported = _export(fn, (x,))
        layers = {"eager": lambda: fn(x), "compiled": lambda: c(x),
                  "exported": lambda: exported(x), "runner": lambda: runner([x])}
        if "ATen" in name:
            pyaten, g2 = _compile(fn, (x,), sequences=False)
            pyrunner = g2.static_runner()
            floor = torch.compile(_fresh(fn), backend=lambda gm, example: gm.forward)
            floor(x)
            layers.update({"compiled_pyaten": lambda: pyaten(x),
                           "runner_pyaten": lambda: pyrunner([x]),
                           "dynamo_floor": lambda: floor(x)})
        times = interleaved(layers, rounds=rounds, min_time_ms=100.0)
        records += _records(name, times)
    return records


def main() -> None:
    p = arg_parser(__doc__)
    p.add_argument("--threads", type=int, default=None,
                   help="torch.set_num_threads(N) first (eager ATen ops on a busy 2-core "
                        "machine can wait milliseconds for a descheduled OpenMP worker)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    records = layers(args.rounds) + chain(args.rounds) + block(args.rounds) + \
        per_step(args.rounds)
    print_table(records, ["case", "layer", "us", "x eager"])
    write_json(args.json, records)


if __name__ == "__main__":
    main()
