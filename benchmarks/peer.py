"""Tessera against TVM MetaSchedule on every operator of benchmarks/ops.py, each as a ratio to torch.

    make tvm-peer                      # TVM's own environment, once (TVM_VENV)
    python benchmarks/peer.py [--ops gemm1024 ...] [--trials 64] [--long-trials 256]
                              [--no-tvm] [--json out.json]

Per operator, Tessera's kernel with the rules' schedule ("default"), construct mode and search
mode at --trials measurements (and at --long-trials on GEMM 1024, the BERT QK^T batch matmul and
the depthwise convolution), each checked against torch and timed between two timings of torch
round by round (common.paired_with_reference), so every time is torch's median times a paired
ratio. TVM MetaSchedule tunes the same operators at the same trials in its own process and
environment (benchmarks/tvm_peer.py, run with TVM_VENV's python), timed against torch there;
its time here is that ratio times this process's torch time, and torch's time there is kept
(tvm_torch_ms) to cross-check the two windows.

Per op a record {"op", "cpu", "torch_ms", "default_ms", "construct_ms", "search_64_ms",
"search_256_ms", "tvm_64_ms", "tvm_256_ms", "tvm_torch_ms", "peak_fraction", "bound",
"tune_s": {"construct", "search_64", "search_256", "tvm_64", "tvm_256"}} (the *_64 keys name
--trials, the *_256 keys --long-trials; null where not run). peak_fraction: the roofline time
(the larger of flops at the probed all-core FMA peak and bytes moved at the probed bandwidth)
over Tessera's best time; bound says which limit the roofline met. The bandwidth is the probe's
(STREAM-like, from memory): an operator whose data stays in the caches can pass 1. The summary: per op
Tessera's best of construct and search against TVM at the same trials.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import tessera  # noqa: E402
from common import arg_parser, paired_with_reference, print_table, write_json  # noqa: E402
from ops import Op, check_close, geomean, suite  # noqa: E402

# The operators tuned at --long-trials too (the three: where TVM's lead was largest).
LONG_OPS = ("gemm1024", "bert_qk", "depthwise_3x3")
TVM_VENV = os.environ.get("TVM_VENV", os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "build-peers", "tvm-venv"))


def tessera_times(op: Op, trials: int, long_trials: Optional[int], rounds: int) -> dict:
    """torch's time and each Tessera tuner's (ms), with the tuners' seconds."""
    outputs, inputs = op.build()
    torch.manual_seed(0)
    data = op.make_inputs()
    want = op.torch_fn(*data)
    reduce_len = max(1, int(op.flops / (2 * want.numel())))
    builds = {"default": {}, "construct": {"tune": "construct"},
              f"search_{trials}": {"tune": "search", "trials": trials}}
    if long_trials:
        builds[f"search_{long_trials}"] = {"tune": "search", "trials": long_trials}
    fns, tune_s = {}, {}
    for key, kw in builds.items():
        t0 = time.perf_counter()
        k = tessera.Kernel(outputs, inputs, name=f"{op.name}_{key}", progress=False,
                           weights=op.weights, **kw)
        tune_s[key] = time.perf_counter() - t0
        got = k(*data)
        check_close(f"{op.name}/{key}", op.out_view(got), want, reduce_len)
        fns[key] = (lambda k=k, out=[got]: k(*data, out=out))
    out = torch.empty_like(want)
    ratios = paired_with_reference(fns, lambda: op.torch_out(data, out), rounds=rounds)
    torch_ms = ratios.pop("reference")
    times = {f"{k}_ms": r * torch_ms for k, r in ratios.items()}
    del tune_s["default"]
    return {"torch_ms": torch_ms, **times, "tune_s": tune_s}


def tvm_records(names: List[str], trials: int, rounds: int) -> Dict[str, dict]:
    """benchmarks/tvm_peer.py's records by op, run in TVM's environment (empty without it)."""
    python = os.path.join(TVM_VENV, "bin", "python")
    with tempfile.TemporaryDirectory(prefix="tessera-peer-") as tmp:
        out = os.path.join(tmp, "tvm.json")
        cmd = [python, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tvm_peer.py"),
               "--ops", *names, "--trials", str(trials), "--rounds", str(rounds), "--json", out]
        rc = subprocess.run(cmd).returncode
        if rc != 0 or not os.path.exists(out):
            print(f"TVM's process exited with {rc}: no TVM column at {trials} trials")
            return {}
        with open(out) as f:
            return {r["op"]: r for r in json.load(f)}


def roofline(op: Op, best_ms: float, peak: dict) -> tuple:
    """(fraction of the roofline Tessera's best time reaches, "compute" | "memory")."""
    data = op.make_inputs()
    moved = sum(t.numel() * t.element_size() for t in data)
    moved += op.torch_fn(*data).numel() * 4
    compute_ms = op.flops / (peak["fp32_gflops_all"] * 1e6)
    memory_ms = moved / (peak["mem_bw_gbs_all"] * 1e6)
    bound = "compute" if compute_ms >= memory_ms else "memory"
    return max(compute_ms, memory_ms) / best_ms, bound


def main() -> None:
    p = arg_parser(__doc__)
    ops = {op.name: op for op in suite()}
    p.add_argument("--ops", nargs="+", choices=list(ops), default=list(ops))
    p.add_argument("--trials", type=int, default=64, help="search and TVM measurements per op")
    p.add_argument("--long-trials", type=int, default=256,
                   help=f"measurements of the longer runs on {', '.join(LONG_OPS)} (0: none)")
    p.add_argument("--no-tvm", action="store_true", help="Tessera's columns only")
    args = p.parse_args()
    peak = json.loads(tessera._C.peak_info())
    long_ops = [n for n in args.ops if n in LONG_OPS] if args.long_trials else []
    tvm: Dict[int, Dict[str, dict]] = {}
    if not args.no_tvm:
        tvm[args.trials] = tvm_records(args.ops, args.trials, args.rounds)
        if long_ops:
            tvm[args.long_trials] = tvm_records(long_ops, args.long_trials, args.rounds)
    records = []
    for name in args.ops:
        op = ops[name]
        long_trials = args.long_trials if name in long_ops else None
        r = {"op": name, "cpu": peak["cpu_model"],
             **{f"{k}_{t}_ms": None for k in ("search", "tvm")
                for t in (args.trials, args.long_trials) if t},
             **tessera_times(op, args.trials, long_trials, args.rounds)}
        for trials in (args.trials, args.long_trials) if args.long_trials else (args.trials,):
            t = tvm.get(trials, {}).get(name, {})
            if "tvm_ms" in t:  # TVM's ratio to torch, on this window's torch time
                r[f"tvm_{trials}_ms"] = t["ratio_to_torch"] * r["torch_ms"]
                r["tune_s"][f"tvm_{trials}"] = t["tune_s"]
                r.setdefault("tvm_torch_ms", t["torch_ms"])
            elif "error" in t:
                r[f"tvm_{trials}_error"] = t["error"]
        best = min(r["construct_ms"], r[f"search_{args.trials}_ms"])
        r["peak_fraction"], r["bound"] = roofline(op, best, peak)
        records.append(r)
        print_table([r], columns(args))
    print()
    print_table(records, columns(args))
    print(summary(records, args.trials, args.long_trials))
    write_json(args.json, records)


def columns(args) -> List[str]:
    t, lt = args.trials, args.long_trials
    return (["op", "torch_ms", "default_ms", "construct_ms", f"search_{t}_ms", f"tvm_{t}_ms"]
            + ([f"search_{lt}_ms", f"tvm_{lt}_ms"] if lt else []) + ["peak_fraction", "bound"])


def summary(records: List[dict], trials: int, long_trials: int) -> str:
    """Tessera's best of construct and search against TVM at the same trials, per op."""
    vs = {r["op"]: r[f"tvm_{trials}_ms"] / min(r["construct_ms"], r[f"search_{trials}_ms"])
          for r in records if r.get(f"tvm_{trials}_ms")}
    if not vs:
        return "no TVM column (make tvm-peer)"
    behind = [f"{k} {v:.2f}" for k, v in vs.items() if v < 1.0]
    long = {r["op"]: r[f"tvm_{long_trials}_ms"] / r[f"search_{long_trials}_ms"]
            for r in records if r.get(f"tvm_{long_trials}_ms") and r.get(f"search_{long_trials}_ms")}
    return (f"Tessera's best at {trials} trials vs TVM's: geomean {geomean(list(vs.values())):.2f}x"
            f" over {len(vs)} ops, behind on {len(behind)}"
            + (f" ({', '.join(behind)})" if behind else "")
            + "".join(f"; {k} at {long_trials}: {v:.2f}x" for k, v in long.items()))


if __name__ == "__main__":
    main()
