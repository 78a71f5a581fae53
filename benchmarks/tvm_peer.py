"""TVM MetaSchedule tunes benchmarks/ops.py's operators: the TVM column of benchmarks/peer.py.

    <TVM's environment>/bin/python benchmarks/tvm_peer.py --ops gemm1024 ... --trials 64
                                                          [--json out.json]

Run by peer.py in TVM's own virtual environment (`make tvm-peer` makes it: apache-tvm beside the
torch and Tessera this project installs, seen through the system site packages), so TVM's
bundled LLVM never shares a process with a Tessera kernel. Each operator is defined in TVM's
tensor expressions (topi for the convolutions and the pooling, as TVM's users write them),
tuned by MetaSchedule for the host's CPU (`mcpu` probed by TVM's LLVM, all cores), built,
checked against torch and timed against torch round by round (common.paired_with_reference:
Tessera's one noise rule), on the same tensors through DLPack.

Per op a record {"op", "trials", "tvm_ms", "torch_ms", "ratio_to_torch", "tune_s",
"max_abs_err"}; an operator TVM fails to tune or build gets {"op", "trials", "error"}.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import tvm  # noqa: E402
from tvm import te, topi  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402
from tvm.target import codegen  # noqa: E402

from common import arg_parser, paired_with_reference, write_json  # noqa: E402
from ops import Op, check_close, suite  # noqa: E402


# Seconds MetaSchedule's local builder and runner give one candidate: TVM's default (30 s) is
# spent by a worker process's start-up alone on a loaded 2-core machine, failing every build.
CANDIDATE_TIMEOUT_S = 300


def te_definition(op: Op):
    """(inputs, output) of op in TVM's tensor expressions, fp32, with op.make_inputs' shapes."""
    p = op.params
    if op.kind == "gemm":
        a, b = te.placeholder((p["m"], p["k"]), name="A"), te.placeholder((p["k"], p["n"]), name="B")
        r = te.reduce_axis((0, p["k"]), name="r")
        return [a, b], te.compute((p["m"], p["n"]), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r))
    if op.kind == "gemv":  # torch.mv(W, x[0]) on x[1, N], W[M, N]
        x, w = te.placeholder((1, p["n"]), name="x"), te.placeholder((p["m"], p["n"]), name="W")
        r = te.reduce_axis((0, p["n"]), name="r")
        return [x, w], te.compute((p["m"],), lambda i: te.sum(w[i, r] * x[0, r], axis=r))
    if op.kind == "bmm":
        b, m, k, n = p["b"], p["m"], p["k"], p["n"]
        a = te.placeholder((b, m, k), name="A")
        y = te.placeholder((b, n, k) if p["trans_b"] else (b, k, n), name="B")
        r = te.reduce_axis((0, k), name="r")
        at = (lambda q, i, j: y[q, j, r]) if p["trans_b"] else (lambda q, i, j: y[q, r, j])
        return [a, y], te.compute((b, m, n), lambda q, i, j: te.sum(a[q, i, r] * at(q, i, j),
                                                                      axis=r))
    if op.kind == "conv":
        c, h, o, k, g = p["c"], p["h"], p["o"], p["k"], p["groups"]
        x = te.placeholder((1, c, h, h), name="X")
        w = te.placeholder((o, c // g, k, k), name="W")
        if g == 1:
            out = topi.nn.conv2d_nchw(x, w, p["stride"], p["pad"], 1)
        else:
            out = topi.nn.group_conv2d_nchw(x, w, p["stride"], p["pad"], 1, g)
        return [x, w], out
    if op.kind == "avgpool":
        x = te.placeholder((p["n"], p["c"], p["h"], p["h"]), name="X")
        return [x], topi.nn.pool2d(x, (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), "avg")
    raise ValueError(f"{op.name}: no TVM definition for a {op.kind!r} operator")


def host_target() -> "tvm.target.Target":
    """The host CPU as TVM's LLVM names it, with every core this process may use."""
    return tvm.target.Target({"kind": "llvm", "mcpu": codegen.llvm_get_system_cpu(),
                              "num-cores": len(os.sched_getaffinity(0))})


def tune_and_time(op: Op, trials: int, rounds: int, target) -> dict:
    """MetaSchedule's kernel for op after `trials` measurements, checked and timed vs torch."""
    inputs, output = te_definition(op)
    mod = tvm.IRModule({"main": te.create_prim_func(inputs + [output])})
    with tempfile.TemporaryDirectory(prefix=f"tvm-{op.name}-") as work_dir:
        t0 = time.perf_counter()
        database = ms.tune_tir(mod, target, work_dir, max_trials_global=trials,
                               num_trials_per_iter=min(64, trials),
                               builder=ms.builder.LocalBuilder(timeout_sec=CANDIDATE_TIMEOUT_S),
                               runner=ms.runner.LocalRunner(timeout_sec=CANDIDATE_TIMEOUT_S))
        schedule = ms.tir_integration.compile_tir(database, mod, target)
        if schedule is None:
            raise RuntimeError(f"MetaSchedule built and measured no candidate in {trials} trials")
        built = tvm.compile(schedule.mod, target=target)
        tune_s = time.perf_counter() - t0
    torch.manual_seed(0)
    data = [t.contiguous() for t in op.make_inputs()]
    want = op.torch_fn(*data)
    got = torch.empty_like(want)
    args = [tvm.runtime.from_dlpack(t) for t in data + [got]]
    main = built["main"]
    main(*args)
    check_close(op.name, got, want, reduce_len=max(1, int(op.flops // max(1, 2 * want.numel()))))
    out = torch.empty_like(want)
    times = paired_with_reference({"tvm": lambda: main(*args)},
                                  lambda: op.torch_out(data, out), rounds=rounds)
    return {"op": op.name, "trials": trials, "tvm_ms": times["tvm"] * times["reference"],
            "torch_ms": times["reference"], "ratio_to_torch": times["tvm"], "tune_s": tune_s,
            "max_abs_err": (got - want).abs().max().item()}


def main() -> None:
    p = arg_parser(__doc__)
    ops = {op.name: op for op in suite()}
    p.add_argument("--ops", nargs="+", choices=list(ops), default=list(ops))
    p.add_argument("--trials", type=int, default=64, help="MetaSchedule's measurements per op")
    args = p.parse_args()
    target = host_target()
    records = []
    for name in args.ops:
        try:
            r = tune_and_time(ops[name], args.trials, args.rounds, target)
        except Exception as e:  # one operator's failure is reported, not the end of the run
            traceback.print_exc()
            r = {"op": name, "trials": args.trials, "error": f"{type(e).__name__}: {e}"}
        print(r, flush=True)
        records.append(r)
    write_json(args.json, records)


if __name__ == "__main__":
    main()
